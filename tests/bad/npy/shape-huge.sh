# a dimension of 2^63 - 1
npy ids.npy "<i4" "(9223372036854775807,)" 3 4
run --weights w.st --input ids=ids.npy
