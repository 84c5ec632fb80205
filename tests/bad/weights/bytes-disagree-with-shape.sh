# shape [8,8] of F32 needs 256 bytes; data_offsets hold 128
safetensors bad.st '{"w":{"dtype":"F32","shape":[8,8],"data_offsets":[0,128]}}' $(words 32)
run --weights bad.st
