# 100000 nested arrays: jansson stops at its depth limit, kiln says so once
model "$(printf '%100000s' '' | tr ' ' '[')"
