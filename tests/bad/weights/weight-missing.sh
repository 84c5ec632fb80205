# the file holds table but not w, which has no init
safetensors bad.st '{"table":{"dtype":"F32","shape":[10,8],"data_offsets":[0,320]}}' $(words 80)
run --weights bad.st
