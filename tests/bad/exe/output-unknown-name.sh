# the model has no output named z
run --weights w.st --output z=z.npy
