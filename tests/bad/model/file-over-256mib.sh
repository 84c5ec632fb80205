# a model file of 256 MiB and one byte (sparse: no disk used)
truncate -s 268435457 "$name.json"
