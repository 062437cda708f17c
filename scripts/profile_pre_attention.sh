#!/usr/bin/env bash
# Nsight Compute on the BF16 pre-attention GEMM kernel at M = 4824 (P = 8) against the engine's
# plain bf16 GEMM and cuBLAS's kernel for the same QKV product: duration, speed of light, tensor
# pipe use, warp stalls. Where does the op's time beyond the bare GEMM go (epilogue, waves,
# mainloop)? Run on the GPU machine from the tree:
#   OUT=out bash scripts/profile_pre_attention.sh
set -u -o pipefail
OUT=${OUT:-out}
mkdir -p "$OUT"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 H3CUPY_CACHE_DIR=$PWD/.h3cache
SECTIONS=(--section SpeedOfLight --section ComputeWorkloadAnalysis --section WarpStateStats
  --section LaunchStats)
NCU=(ncu --clock-control none --kernel-name-base mangled)
{
  echo "== h3cupy BF16 pre-attention kernel, M = 4824"
  timeout 150 "${NCU[@]}" --kernel-name "regex:pre_attention_bf16_x2" --launch-skip 2 \
    --launch-count 1 "${SECTIONS[@]}" python3 benchmarks/pre_attention.py --p 8 --no-compile --reps 1
  echo "== h3cupy bf16 engine GEMM, QKV, M = 4824"
  timeout 120 "${NCU[@]}" --kernel-name "regex:gemm_wgmma" --launch-skip 2 --launch-count 1 \
    "${SECTIONS[@]}" python3 benchmarks/gemm.py --m 4824 --fmt bf16 --shapes qkv --backend wgmma --reps 2
  echo "== cuBLAS (torch.mm), QKV, M = 4824: the fourth call's kernels"
  timeout 90 "${NCU[@]}" --profile-from-start off --launch-skip 3 --launch-count 1 \
    "${SECTIONS[@]}" python3 -c '
import torch
a = torch.randn(4824, 5376, device="cuda").bfloat16()
b = (torch.randn(21504, 5376, device="cuda") * 0.01).bfloat16()
torch.cuda.synchronize()
torch.cuda.profiler.start()
for _ in range(6):
    torch.mm(a, b.t())
torch.cuda.synchronize()
torch.cuda.profiler.stop()'
} 2>&1 | tee "$OUT/ncu_pre_attention.txt"
