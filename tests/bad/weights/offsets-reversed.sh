# data_offsets end before they begin
safetensors bad.st '{"w":{"dtype":"F32","shape":[8,8],"data_offsets":[256,0]}}' $(words 64)
run --weights bad.st
