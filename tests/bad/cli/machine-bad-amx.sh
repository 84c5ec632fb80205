# --machine amx= takes 0 or 1
kiln build m.json --machine amx=2
