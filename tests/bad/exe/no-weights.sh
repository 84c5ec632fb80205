# w has no init, so --weights is needed
run
