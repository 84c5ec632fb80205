# not a .npy file at all
printf "not a numpy file" >ids.npy
run --weights w.st --input ids=ids.npy
