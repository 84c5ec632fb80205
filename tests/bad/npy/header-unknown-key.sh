# a key numpy does not write
npy_raw ids.npy "{'descr': '<i4', 'fortran_order': False, 'shape': (2,), 'order': 'C'}" 3 4
run --weights w.st --input ids=ids.npy
