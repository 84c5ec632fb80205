# a pass kiln does not have
kiln emit-c m.json --stop-after vectorize
