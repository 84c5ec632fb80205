# pos is a scalar; the file holds [1]
npy pos.npy "<i4" "(1,)" 0
run --weights w.st --input pos=pos.npy
