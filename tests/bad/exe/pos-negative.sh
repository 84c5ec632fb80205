# a negative position
npy pos.npy "<i4" "()" -1
run --weights w.st --input pos=pos.npy
