# shape (2) is an int in parentheses, not a tuple
npy_raw ids.npy "{'descr': '<i4', 'fortran_order': False, 'shape': (2)}" 3 4
run --weights w.st --input ids=ids.npy
