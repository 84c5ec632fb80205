# dump needs --dump-dir or --after
kiln dump m.json
