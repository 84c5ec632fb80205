# -o names a directory
mkdir out
kiln emit-c m.json -o out
