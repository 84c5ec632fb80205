# the same input given twice
npy ids.npy "<i4" "(2,)" 3 4
run --weights w.st --input ids=ids.npy --input ids=ids.npy
