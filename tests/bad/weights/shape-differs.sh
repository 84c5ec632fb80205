# w is [8,4] in the file (bytes agree with that shape); the model declares [8,8]
safetensors bad.st '{"w":{"dtype":"F32","shape":[8,4],"data_offsets":[0,128]}}' $(words 32)
run --weights bad.st
