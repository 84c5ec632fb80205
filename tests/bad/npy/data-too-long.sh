# 4 bytes of data past the shape
npy ids.npy "<i4" "(2,)" 3 4 5
run --weights w.st --input ids=ids.npy
