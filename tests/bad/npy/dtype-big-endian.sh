# big-endian int32
npy ids.npy ">i4" "(2,)" 3 4
run --weights w.st --input ids=ids.npy
