# \u0000 in a string: a name could not be a C string
model '{"format": "kiln/1", "name": "m", "inputs": [{"name": "x\u0000y", "shape": [1]}], "nodes": [], "outputs": ["x"]}'
