# an option kiln does not have
kiln build m.json --fast -o m
