# float64 data
npy x.npy "<f8" "(2, 8)" $(words 32)
run --weights w.st --input x=x.npy
