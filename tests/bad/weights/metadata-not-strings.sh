# __metadata__ values must be strings
safetensors bad.st '{"__metadata__":{"step":100},"w":{"dtype":"F32","shape":[8,8],"data_offsets":[0,256]}}' $(words 64)
run --weights bad.st
