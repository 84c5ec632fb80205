# an index whose metadata nests 40 deep (it is skipped, to a bounded depth)
{ printf '{"metadata": '; i=0; while [ $i -lt 40 ]; do printf '['; i=$((i+1)); done
  i=0; while [ $i -lt 40 ]; do printf ']'; i=$((i+1)); done; printf ', "weight_map": {"w": "w.st"}}'; } > m.index.json
run --weights m.index.json
