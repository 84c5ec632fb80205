echo "skip  netns: not written yet"
