# a tensor without data_offsets
safetensors bad.st '{"w":{"dtype":"F32","shape":[8,8]}}' $(words 64)
run --weights bad.st
