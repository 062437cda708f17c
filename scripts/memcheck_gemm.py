"""Run each GEMM path once at a small M, for compute-sanitizer memcheck:

compute-sanitizer --tool memcheck --report-api-errors no python3 scripts/memcheck_gemm.py

NOTE: `--report-api-errors no`: the launch-time argument check (h3cupy.core.launch.check_params)
finds a kernel's parameter count by asking cuFuncGetParamInfo for one index past the last, which
answers CUDA_ERROR_INVALID_VALUE by design; the sanitizer would report that call once per kernel
(2026-12-01: 16 such reports and nothing else over 16 paths).
"""

from __future__ import annotations

import os

import cupy
import numpy as np

from h3cupy import formats
from h3cupy.core import arch
from h3cupy.ops import gemm


def main() -> None:
    rng = np.random.default_rng(0)
    m, n, k = 129, 512, 1024
    a = cupy.asarray(formats.to_bf16(rng.normal(0, 0.5, (m, k)).astype(np.float32)))
    b = cupy.asarray(formats.to_bf16(rng.normal(0, 0.01, (n, k)).astype(np.float32)))
    aq = cupy.asarray(rng.integers(0, 0x7E, (m, k), dtype=np.uint8))
    bq = cupy.asarray(rng.integers(0, 0x7E, (n, k), dtype=np.uint8))
    rs = cupy.ones(m, np.float32)
    cs = cupy.ones(n, np.float32)
    gemm.gemm_mma_sync(a, b, fmt="bf16")
    gemm.gemm_mma_sync(aq, bq, fmt="e4m3", row_scale=rs, col_scale=cs)
    paths = 2
    if arch.current_target() in ("sm_90a", "sm_120a"):
        # the producer-warpgroup form (default), the thread-0 form, the sm_120 plan
        for kw in ({}, {"ws": False}, {"sm120_plan": True}):
            gemm.gemm_mma_tma(a, b, fmt="bf16", row_scale=rs, col_scale=cs, **kw)
            gemm.gemm_mma_tma(aq, bq, fmt="e4m3", row_scale=rs, col_scale=cs, **kw)
            paths += 2
    if arch.current_target() == "sm_90a":
        for fmt, tile_n, promote, cluster, pingpong in gemm.WGMMA_VARIANTS:
            if pingpong and os.environ.get("H3CUPY_TEST_PINGPONG") != "1":
                continue  # opt-in, as in tests/test_gemm_gpu.py (gpu_round.sh sets it)
            x, y = (a, b) if fmt == "bf16" else (aq, bq)
            gemm.gemm_wgmma(
                x,
                y,
                fmt=fmt,
                row_scale=rs,
                col_scale=cs,
                tile_n=tile_n,
                promote=promote,
                cluster=cluster,
                pingpong=pingpong,
            )
            paths += 1
        # the swap-AB small-M path (M <= 136): one activation tile, unsplit and split-K
        gemm.gemm_wgmma_small_m(a, b, splits=1)
        gemm.gemm_wgmma_small_m(a, b, splits=3)
        paths += 2
    if arch.current_target() in ("sm_90a", "sm_120a"):
        # NVFP4: the TMA-fed NVFP4 skeleton (sm_120 plan: 64-byte k-tiles, A-scale boxes shared
        # by two k-tiles; block-scaled MMA on sm_120a, bf16 emulation on sm_90a), and on sm_90a
        # the Hopper path (exact bf16 dequantization, then the bf16 engine)
        from h3cupy.testing import nvfp4_gemm_operands

        nv = [cupy.asarray(x) for x in nvfp4_gemm_operands(rng, m, n, k)[:4]]
        gemm.gemm_nvfp4(*nv, alpha=1.0)
        paths += 1
        if arch.current_target() == "sm_90a":
            from h3cupy.core import interop

            a_bf = cupy.empty((m, k), formats.BF16)
            w_bf = cupy.empty((n, k), formats.BF16)
            t = [interop.as_tensor(x, f"t{i}") for i, x in enumerate((*nv, a_bf, w_bf))]
            gemm.nvfp4_dequantize_bf16(t[0], t[1], t[4], swizzled=False)
            gemm.nvfp4_dequantize_bf16(t[2], t[3], t[5], swizzled=True)
            gemm.gemm_wgmma(a_bf, w_bf, fmt="bf16")
            paths += 1
    cupy.cuda.Device().synchronize()
    print(f"memcheck_gemm: {paths} GEMM paths ran at M={m}, N={n}, K={k}")


if __name__ == "__main__":
    main()
