# column-major data
npy_raw x.npy "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 8), }" $(words 16)
run --weights w.st --input x=x.npy
