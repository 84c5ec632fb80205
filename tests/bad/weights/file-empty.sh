# an empty file
: >bad.st
run --weights bad.st
