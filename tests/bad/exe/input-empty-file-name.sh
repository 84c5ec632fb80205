# NAME= with no file
run --weights w.st --input ids=
