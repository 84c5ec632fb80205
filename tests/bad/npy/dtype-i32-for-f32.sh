# x is f32; the file holds i32
npy x.npy "<i4" "(2, 8)" $(words 16 1)
run --weights w.st --input x=x.npy
