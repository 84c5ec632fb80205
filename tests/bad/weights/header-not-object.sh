# the header is a JSON array
safetensors bad.st '[]'
run --weights bad.st
