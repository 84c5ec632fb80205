# --dump-dir names a plain file
echo text >file
kiln dump m.json --dump-dir file
