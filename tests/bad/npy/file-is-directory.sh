# a directory where the file should be
mkdir ids.npy
run --weights w.st --input ids=ids.npy
