# no tensors at all: w, which has no init, is missing
safetensors bad.st '{}'
run --weights bad.st
