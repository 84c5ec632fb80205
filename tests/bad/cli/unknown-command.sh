# a command kiln does not have
kiln compile m.json
