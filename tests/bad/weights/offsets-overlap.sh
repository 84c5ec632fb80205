# table starts inside w: bytes [128, 256) belong to both
safetensors bad.st '{"w":{"dtype":"F32","shape":[8,8],"data_offsets":[0,256]},"table":{"dtype":"F32","shape":[10,8],"data_offsets":[128,448]}}' $(words 112)
run --weights bad.st
