# a directory where the file should be
mkdir dir.st
run --weights dir.st
