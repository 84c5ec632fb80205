# text after the dict
npy_raw ids.npy "{'descr': '<i4', 'fortran_order': False, 'shape': (2,)} junk" 3 4
run --weights w.st --input ids=ids.npy
