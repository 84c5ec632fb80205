# F16 [8,8] needs 128 bytes; data_offsets hold 256
safetensors bad.st '{"w":{"dtype":"F16","shape":[8,8],"data_offsets":[0,256]}}' $(words 64)
run --weights bad.st
