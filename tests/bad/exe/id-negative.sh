# a negative id
npy ids.npy "<i4" "(2,)" -1 0
run --weights w.st --input ids=ids.npy
