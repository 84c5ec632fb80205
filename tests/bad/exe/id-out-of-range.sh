# table has 10 rows: id 10 is one past the end
npy ids.npy "<i4" "(2,)" 3 10
run --weights w.st --input ids=ids.npy
