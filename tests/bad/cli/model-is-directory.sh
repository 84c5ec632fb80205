# a directory given as the model: read as a Hugging Face folder, without its config.json
mkdir dir.json
kiln check dir.json
