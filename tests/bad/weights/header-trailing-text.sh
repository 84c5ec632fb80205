# text after the header object
safetensors bad.st '{"w":{"dtype":"F32","shape":[8,8],"data_offsets":[0,256]}} {}' $(words 64)
run --weights bad.st
