# the most negative i32
npy ids.npy "<i4" "(2,)" 0 -2147483648
run --weights w.st --input ids=ids.npy
