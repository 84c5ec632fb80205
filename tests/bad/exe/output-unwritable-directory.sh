# an output in a directory where nothing can be created
unwritable ro
run --weights w.st --output y=ro/y.npy
