# emit-c -o in a directory where nothing can be created
unwritable ro
kiln emit-c m.json -o ro/m.c
