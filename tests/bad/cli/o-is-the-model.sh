# -o names the model file itself
kiln emit-c m.json -o m.json
