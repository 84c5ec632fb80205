# --input at the end, without its value
run --weights w.st --input
