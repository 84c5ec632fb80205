# data_offsets of 2^64 - 1
safetensors bad.st '{"w":{"dtype":"F32","shape":[8,8],"data_offsets":[18446744073709551359,18446744073709551615]}}' $(words 64)
run --weights bad.st
