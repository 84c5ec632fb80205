# w as [64]: the same elements, another shape
safetensors bad.st '{"w":{"dtype":"F32","shape":[64],"data_offsets":[0,256]}}' $(words 64)
run --weights bad.st
