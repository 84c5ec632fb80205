# -o names the model through a symbolic link
ln -s m.json link.json
kiln build m.json -o link.json
