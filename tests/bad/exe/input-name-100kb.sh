# --input with a name of 100 kB: no such input, said on one line
run --weights w.st --input "$(printf '%102400s' '' | tr ' ' a)=x.npy"
