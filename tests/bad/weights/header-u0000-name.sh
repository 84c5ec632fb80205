# a tensor name holding \u0000
safetensors bad.st '{"w\u0000":{"dtype":"F32","shape":[8,8],"data_offsets":[0,256]}}' $(words 64)
run --weights bad.st
