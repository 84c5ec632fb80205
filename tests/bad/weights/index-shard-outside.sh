# an index naming a shard outside its folder
printf '{"weight_map": {"w": "../w.st"}}' > m.index.json
run --weights m.index.json
