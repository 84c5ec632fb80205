# a directory where the file should be: a model folder, as --weights
# takes one, without its model.safetensors
mkdir dir.st
run --weights dir.st
