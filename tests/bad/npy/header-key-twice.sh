# shape given twice
npy_raw ids.npy "{'descr': '<i4', 'fortran_order': False, 'shape': (2,), 'shape': (2,)}" 3 4
run --weights w.st --input ids=ids.npy
