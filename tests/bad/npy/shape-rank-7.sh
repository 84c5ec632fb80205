# rank 7
npy ids.npy "<i4" "(1, 1, 1, 1, 1, 1, 2)" 3 4
run --weights w.st --input ids=ids.npy
