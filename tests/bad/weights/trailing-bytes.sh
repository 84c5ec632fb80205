# 4 bytes after the last tensor
safetensors bad.st '{"w":{"dtype":"F32","shape":[8,8],"data_offsets":[0,256]}}' $(words 65)
run --weights bad.st
