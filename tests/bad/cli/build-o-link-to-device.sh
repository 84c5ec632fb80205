# build -o a link to /dev/null: refused, the link stays
ln -s /dev/null out
kiln build m.json -o out
