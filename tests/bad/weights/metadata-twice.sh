# __metadata__ given twice
safetensors bad.st '{"__metadata__":{},"__metadata__":{},"w":{"dtype":"F32","shape":[8,8],"data_offsets":[0,256]}}' $(words 64)
run --weights bad.st
