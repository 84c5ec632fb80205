# a tensor name with the byte 0xff
{ le64 11; printf '{"w\377":{}}  '; } >bad.st
run --weights bad.st
