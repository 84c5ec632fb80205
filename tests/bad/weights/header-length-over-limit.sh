# the header length is 100000001, one past the limit (the file is sparse)
{ le64 100000001; printf '{}'; } >bad.st
truncate -s 100000009 bad.st
run --weights bad.st
