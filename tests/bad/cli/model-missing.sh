# no such model file: an I/O error
kiln emit-c none.json
