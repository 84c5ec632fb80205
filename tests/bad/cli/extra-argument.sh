# two model files
kiln emit-c m.json m.json
