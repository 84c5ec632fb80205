# the cache holds 4 rows and 2 are written: pos 3 puts row 4 past the end
npy pos.npy "<i4" "()" 3
run --weights w.st --input pos=pos.npy
