# no such file: an I/O error
run --weights w.st --input ids=none.npy
