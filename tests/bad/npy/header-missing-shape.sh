# no shape
npy_raw ids.npy "{'descr': '<i4', 'fortran_order': False}" 3 4
run --weights w.st --input ids=ids.npy
