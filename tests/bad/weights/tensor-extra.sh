# a tensor the model does not declare
safetensors bad.st '{"w":{"dtype":"F32","shape":[8,8],"data_offsets":[0,256]},"lm_head":{"dtype":"F32","shape":[1],"data_offsets":[256,260]}}' $(words 65)
run --weights bad.st
