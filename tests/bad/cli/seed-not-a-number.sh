# --seed takes a whole number
kiln check m.json --seed one
