# x is [2,8]; the file holds [8,2]
npy x.npy "<f4" "(8, 2)" $(words 16)
run --weights w.st --input x=x.npy
