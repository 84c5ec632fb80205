# build --lib -o naming the model file
kiln build m.json --lib -o m.json
