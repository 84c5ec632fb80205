# a bare argument
run --weights w.st ids.npy
