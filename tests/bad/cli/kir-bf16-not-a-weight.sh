# a .kir input buffer held as bf16: only a weight is (ir/KIR.md)
cat > p.kir <<'KIR'
graph g
  input  %0 "x" : f32[2]
  %1 "y" = relu %0 : f32[2]
  output %1
prog g
  buf b0 input 0 %0 : f32[2] bf16
  buf b1 output 0 %1 : f32[2]
KIR
kiln opt p.kir --passes tile
