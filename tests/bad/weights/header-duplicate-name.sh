# the tensor w twice
safetensors bad.st '{"w":{"dtype":"F32","shape":[8,8],"data_offsets":[0,256]},"w":{"dtype":"F32","shape":[8,8],"data_offsets":[256,512]}}' $(words 128)
run --weights bad.st
