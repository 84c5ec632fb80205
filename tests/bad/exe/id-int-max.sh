# the largest i32: id * row length must not wrap
npy ids.npy "<i4" "(2,)" 2147483647 0
run --weights w.st --input ids=ids.npy
