# data_offsets reach past the end of the data section
safetensors bad.st '{"w":{"dtype":"F32","shape":[8,8],"data_offsets":[0,256]}}' $(words 32)
run --weights bad.st
