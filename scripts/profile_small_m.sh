#!/usr/bin/env bash
# Nsight Compute on the bf16 QKV GEMM at M = 1 (the engine's weight stream, issue #3's small-M
# bar: no worse than 2x cuBLAS) and on cuBLAS's kernels for the same product, then on the FP8
# pre-attention kernel at M = 4824 (192-row tiles): speed of light, memory workload, warp stalls,
# occupancy. Run on the GPU machine from the tree:
#   OUT=out bash scripts/profile_small_m.sh
set -u -o pipefail
OUT=${OUT:-out}
mkdir -p "$OUT"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 H3CUPY_CACHE_DIR=$PWD/.h3cache
SECTIONS=(--section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats
  --section Occupancy --section LaunchStats)
NCU=(ncu --clock-control none --kernel-name-base mangled)
{
  echo "== h3cupy bf16 engine, QKV, M = 1"
  timeout 120 "${NCU[@]}" --kernel-name "regex:gemm_wgmma" --launch-skip 3 --launch-count 1 \
    "${SECTIONS[@]}" python3 benchmarks/gemm.py --m 1 --fmt bf16 --shapes qkv --backend wgmma --reps 2
  echo "== cuBLAS (torch.mm), QKV, M = 1: every kernel of the fourth call"
  timeout 90 "${NCU[@]}" --profile-from-start off --launch-skip 3 --launch-count 2 \
    "${SECTIONS[@]}" python3 -c '
import torch
a = torch.randn(1, 5376, device="cuda").bfloat16()
b = (torch.randn(21504, 5376, device="cuda") * 0.01).bfloat16()
torch.cuda.synchronize()
torch.cuda.profiler.start()
for _ in range(6):
    torch.mm(a, b.t())
torch.cuda.synchronize()
torch.cuda.profiler.stop()'
  echo "== h3cupy FP8 pre-attention kernel, M = 4824"
  timeout 120 "${NCU[@]}" --kernel-name "regex:pre_attention_fp8_m192" --launch-skip 2 \
    --launch-count 1 "${SECTIONS[@]}" python3 benchmarks/ops_fp8.py --ops pre_attention --m 4824 \
    --no-compile --reps 1
} 2>&1 | tee "$OUT/ncu_small_m.txt"
