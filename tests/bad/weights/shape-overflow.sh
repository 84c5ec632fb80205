# dimensions whose product overflows 64 bits
safetensors bad.st '{"w":{"dtype":"F32","shape":[4294967296,4294967296,4294967296],"data_offsets":[0,256]}}' $(words 64)
run --weights bad.st
