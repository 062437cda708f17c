#!/usr/bin/env bash
# Which cuBLAS kernels (tile shapes, clusters, grids) torch.mm (bf16) and torch._scaled_mm (FP8,
# row-wise scales) pick at the H3 GEMM shapes, and their GPU time under Nsight Compute, next to
# the engine's kernels: the baselines' tile choices, for the engine's own. Run on the GPU machine:
#   OUT=out bash scripts/profile_cublas_tiles.sh
set -u -o pipefail
OUT=${OUT:-out}
mkdir -p "$OUT"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 H3CUPY_CACHE_DIR=$PWD/.h3cache
NCU=(ncu --clock-control none --metrics gpu__time_duration.sum,launch__grid_size,launch__cluster_dim_x,launch__cluster_dim_y)
timeout 240 "${NCU[@]}" --profile-from-start off python3 - <<'PY' 2>&1 | tee "$OUT/ncu_cublas_tiles.txt"
import torch
from h3cupy.ops import gemm
SHAPES = {"qkv": (5376, 21504), "o": (7168, 5376), "fc1": (5376, 28672), "fc2": (14336, 5376)}
for m in (4824, 38592):
    for name, (k, n) in SHAPES.items():
        a = torch.randn(m, k, device="cuda").bfloat16()
        b = (torch.randn(n, k, device="cuda") * 0.01).bfloat16()
        a8, b8 = a.to(torch.float8_e4m3fn), b.to(torch.float8_e4m3fn)
        sa = torch.ones(m, 1, device="cuda")
        sb = torch.ones(1, n, device="cuda")
        c = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
        for _ in range(2):  # warm (tuning, caches)
            torch.mm(a, b.t()); torch._scaled_mm(a8, b8.t(), sa, sb, out_dtype=torch.bfloat16)
            gemm.gemm_wgmma(a, b, out=c); gemm.gemm_wgmma(a8, b8, fmt="e4m3", row_scale=sa.view(-1), col_scale=sb.view(-1), out=c)
        torch.cuda.synchronize()
        print(f"## {name} M={m}: torch.mm, _scaled_mm, engine bf16, engine FP8", flush=True)
        torch.cuda.profiler.start()
        torch.mm(a, b.t())
        torch._scaled_mm(a8, b8.t(), sa, sb, out_dtype=torch.bfloat16)
        gemm.gemm_wgmma(a, b, out=c)
        gemm.gemm_wgmma(a8, b8, fmt="e4m3", row_scale=sa.view(-1), col_scale=sb.view(-1), out=c)
        torch.cuda.synchronize()
        torch.cuda.profiler.stop()
PY
