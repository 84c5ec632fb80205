# --input needs NAME=FILE
run --weights w.st --input ids.npy
