# 4 bytes: not even the 8-byte header length
printf '\001\000\000\000' >bad.st
run --weights bad.st
