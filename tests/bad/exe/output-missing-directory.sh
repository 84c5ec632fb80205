# an output in a directory that does not exist: an I/O error
run --weights w.st --output y=no/such/dir/y.npy
