# a tensor with a key safetensors does not have
safetensors bad.st '{"w":{"dtype":"F32","shape":[8,8],"data_offsets":[0,256],"order":"C"}}' $(words 64)
run --weights bad.st
