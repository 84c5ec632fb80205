# an output path that is a directory
mkdir y.npy
run --weights w.st --output y=y.npy
