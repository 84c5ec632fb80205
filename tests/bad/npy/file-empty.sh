# an empty file
: >ids.npy
run --weights w.st --input ids=ids.npy
