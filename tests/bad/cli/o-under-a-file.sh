# -o below a plain file
echo text >file
kiln build m.json -o file/m
