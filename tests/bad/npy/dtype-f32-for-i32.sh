# ids are i32; the file holds f32
npy ids.npy "<f4" "(2,)" $F1 $F1
run --weights w.st --input ids=ids.npy
