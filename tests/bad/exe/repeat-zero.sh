# --repeat 0
run --weights w.st --repeat 0
