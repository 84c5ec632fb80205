# a tensor name of 100 kB: refused, and quoted in the message cut after 60 bytes
long=$(printf '%102400s' '' | tr ' ' 'a')
model "{\"format\": \"kiln/1\", \"name\": \"m\", \"inputs\": [{\"name\": \"$long\", \"shape\": [1]}], \"nodes\": [], \"outputs\": [\"$long\"]}"
