# a command without its model
kiln build
