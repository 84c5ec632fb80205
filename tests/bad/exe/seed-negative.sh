# --seed takes a whole number
run --weights w.st --seed -1
