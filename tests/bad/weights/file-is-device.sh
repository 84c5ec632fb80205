# a device where the weights file should be
run --weights /dev/null
