# an output through a link to /dev/full, a device that is always full: an
# I/O error, said once (the link is written through, never replaced)
ln -s /dev/full full.npy
run --weights w.st --output y=full.npy
