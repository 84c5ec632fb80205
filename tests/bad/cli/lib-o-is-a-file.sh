# build --lib -o a plain file
echo text >file
kiln build m.json --lib -o file
