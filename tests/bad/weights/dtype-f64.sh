# a dtype kiln does not read
safetensors bad.st '{"w":{"dtype":"F64","shape":[8,8],"data_offsets":[0,512]}}' $(words 128)
run --weights bad.st
