# the header length says 118 bytes; the file ends after 20
{ printf "\223NUMPY\001\000"; le16 118; printf "{'descr': '<i4'"; } >ids.npy
run --weights w.st --input ids=ids.npy
