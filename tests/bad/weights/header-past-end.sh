# the header length says 1000 bytes; the file holds 58
{ le64 1000; printf '{"w":{"dtype":"F32","shape":[8,8],"data_offsets":[0,256]}}'; } >bad.st
run --weights bad.st
