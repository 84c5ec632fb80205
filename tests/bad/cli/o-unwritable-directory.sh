# -o in a directory where nothing can be created
unwritable ro
kiln build m.json -o ro/m
