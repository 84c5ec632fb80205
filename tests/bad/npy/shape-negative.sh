# a negative dimension
npy ids.npy "<i4" "(-2,)" 3 4
run --weights w.st --input ids=ids.npy
