# an index putting 'w' in a shard that holds only 'table'
safetensors t.st '{"table":{"dtype":"F32","shape":[10,8],"data_offsets":[0,320]}}' $(words 80)
printf '{"weight_map": {"table": "t.st", "w": "t.st"}}' > m.index.json
run --weights m.index.json
