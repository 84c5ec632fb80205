# a byte 0xff inside a string: not UTF-8, so not JSON
printf '{"format": "kiln/1", "name": "m\377", "nodes": [], "outputs": []}\n' >"$name.json"
