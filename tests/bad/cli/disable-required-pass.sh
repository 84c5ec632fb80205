# lower cannot be disabled
kiln build m.json --disable-pass lower
