# the model has no input named nope
npy ids.npy "<i4" "(2,)" 3 4
run --weights w.st --input nope=ids.npy
