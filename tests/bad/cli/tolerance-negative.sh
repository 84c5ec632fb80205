# --tolerance takes a number >= 0
kiln check m.json --tolerance -1e-4
