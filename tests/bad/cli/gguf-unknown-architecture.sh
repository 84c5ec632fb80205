# a GGUF file of an architecture kiln does not import, as MODEL
gguf m.gguf general.architecture=s:falcon falcon.block_count=u:2
kiln build m.gguf -o exe
