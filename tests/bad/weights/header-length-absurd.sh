# the header length is 2^64 - 1
{ le64 -1; printf '{}'; } >bad.st
run --weights bad.st
