# a GGUF file whose keys are all there but not its embedding table
gguf m.gguf general.architecture=s:llama llama.block_count=u:1 llama.embedding_length=u:8 \
    llama.feed_forward_length=u:16 llama.attention.head_count=u:2 llama.context_length=u:4 \
    llama.attention.layer_norm_rms_epsilon=f:$F1
kiln import gguf m.gguf -o m.json
