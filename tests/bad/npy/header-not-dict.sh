# the header is a list
npy_raw ids.npy "['<i4', False, (2,)]" 3 4
run --weights w.st --input ids=ids.npy
