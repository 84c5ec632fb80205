# shape (2, 8) needs 64 bytes of data; the file holds 60
npy x.npy "<f4" "(2, 8)" $(words 15)
run --weights w.st --input x=x.npy
