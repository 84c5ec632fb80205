# --max-memory takes bytes
kiln build m.json --max-memory 4MB
