# a tensor entry that is a string
safetensors bad.st '{"w":"F32"}'
run --weights bad.st
