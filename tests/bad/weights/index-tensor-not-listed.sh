# a shard holding a tensor ('table') that its index does not list
safetensors t.st '{"table":{"dtype":"F32","shape":[10,8],"data_offsets":[0,320]},"w":{"dtype":"F32","shape":[8,8],"data_offsets":[320,576]}}' $(words 144)
printf '{"weight_map": {"w": "t.st"}}' > m.index.json
run --weights m.index.json
