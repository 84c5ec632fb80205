# -o in a directory that does not exist: an I/O error
kiln build m.json -o no/such/dir/m
