# C needs the loop IR
kiln emit-c m.json --stop-after simplify
