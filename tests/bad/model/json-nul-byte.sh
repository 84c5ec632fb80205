# a NUL byte in the middle of the file
printf '{"format": "kiln/1",\000 "name": "m", "nodes": [], "outputs": []}\n' >"$name.json"
