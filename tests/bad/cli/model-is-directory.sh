# a directory given as the model
mkdir dir.json
kiln check dir.json
