# the header is not JSON
safetensors bad.st '{w: F32}'
run --weights bad.st
