# a tensor named by 100 kB of 'a': not a weight of the model, said on one line
long=$(printf '%102400s' '' | tr ' ' a)
safetensors bad.st "{\"w\":{\"dtype\":\"F32\",\"shape\":[8,8],\"data_offsets\":[0,256]},\"$long\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[256,260]}}" $(words 65)
run --weights bad.st
