# the model has no input named nope
npy ids.npy "<i4" "(2,)" 3 4
kiln check m.json --input nope=ids.npy
