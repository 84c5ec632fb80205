# 4 bytes between w and table belong to no tensor
safetensors bad.st '{"w":{"dtype":"F32","shape":[8,8],"data_offsets":[0,256]},"table":{"dtype":"F32","shape":[10,8],"data_offsets":[260,580]}}' $(words 145)
run --weights bad.st
