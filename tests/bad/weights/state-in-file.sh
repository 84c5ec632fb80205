# the state (cache) is not a weight
safetensors bad.st '{"w":{"dtype":"F32","shape":[8,8],"data_offsets":[0,256]},"cache":{"dtype":"F32","shape":[4,2,4],"data_offsets":[256,384]}}' $(words 96)
run --weights bad.st
