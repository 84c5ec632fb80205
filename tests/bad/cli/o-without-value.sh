# -o at the end, without its path
kiln emit-c m.json -o
