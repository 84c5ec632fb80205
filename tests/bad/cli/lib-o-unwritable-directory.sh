# build --lib -o a directory where nothing can be created
unwritable ro
kiln build m.json --lib -o ro
