# an integer dtype for a float weight
safetensors bad.st '{"w":{"dtype":"I32","shape":[8,8],"data_offsets":[0,256]}}' $(words 64)
run --weights bad.st
