# an index naming a shard that is not there
printf '{"metadata": {"total_size": 256}, "weight_map": {"w": "none.st"}}' > m.index.json
run --weights m.index.json
