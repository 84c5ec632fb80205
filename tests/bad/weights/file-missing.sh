# no such file: an I/O error
run --weights none.st
