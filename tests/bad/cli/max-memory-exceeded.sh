# the intermediates need more than --max-memory: invalid, and nothing built
kiln build m.json --max-memory 64 -o m
