# emit-c -o a link into a directory that does not exist: written through, so an I/O error
ln -s no/such/dir/m.c out.c
kiln emit-c m.json -o out.c
