# --weight-dtype takes f32, bf16 or f16 only
kiln build m.json --weight-dtype f64 -o out
