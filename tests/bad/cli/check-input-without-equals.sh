# --input needs NAME=FILE
kiln check m.json --input ids.npy
