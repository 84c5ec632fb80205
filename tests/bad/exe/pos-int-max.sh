# the largest i32: pos + T must not wrap
npy pos.npy "<i4" "()" 2147483647
run --weights w.st --input pos=pos.npy
