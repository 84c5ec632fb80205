# a .npy version kiln does not know
printf "\223NUMPY\011\000" >ids.npy
run --weights w.st --input ids=ids.npy
