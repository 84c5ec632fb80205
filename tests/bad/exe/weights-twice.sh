# --weights twice
run --weights w.st --weights w.st
