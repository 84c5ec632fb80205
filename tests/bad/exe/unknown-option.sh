# an option the executable does not have
run --weights w.st --frobnicate
