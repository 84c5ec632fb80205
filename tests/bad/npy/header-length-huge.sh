# version 2.0, header length 2^32 - 1
{ printf "\223NUMPY\002\000"; le32 -1; } >ids.npy
run --weights w.st --input ids=ids.npy
