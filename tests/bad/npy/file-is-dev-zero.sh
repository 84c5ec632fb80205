# an endless stream of zero bytes
run --weights w.st --input x=/dev/zero
