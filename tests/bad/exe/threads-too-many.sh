# --threads beyond the limit
run --weights w.st --threads 5000
