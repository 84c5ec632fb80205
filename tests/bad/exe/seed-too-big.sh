# --seed past 2^64 - 1
run --weights w.st --seed 18446744073709551616
