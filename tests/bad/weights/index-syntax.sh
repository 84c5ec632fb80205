# an index of shards (a --weights path ending in .json) that is not JSON
printf '{"weight_map": {"w": }}' > m.index.json
run --weights m.index.json
