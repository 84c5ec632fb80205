# build --lib needs -o DIR
kiln build m.json --lib
