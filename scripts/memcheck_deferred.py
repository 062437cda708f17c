"""The deferred epilogue (promotion mode 5) under compute-sanitizer memcheck, at sizes where each
persistent CTA runs several tiles (so a tile's finish runs under the next tile's first k-tiles):

compute-sanitizer --tool memcheck --report-api-errors no python3 scripts/memcheck_deferred.py

the engine's plain GEMM (2000 x 5376 x 1024: 16 x 28 = 448 tiles of 128 x 192 on 132 CTAs), the
FP8 out_proj in both forms and the MLP, at M = 1000 (8 row tiles: 224 out_proj tiles). See
memcheck_gemm.py for --report-api-errors.
"""

from __future__ import annotations

import cupy
import numpy as np

from h3cupy import formats
from h3cupy.ops import gemm, mlp, out_proj
from h3cupy.reference import inputs


def main() -> None:
    rng = np.random.default_rng(0)
    m, n, k = 2000, 5376, 1024
    aq = cupy.asarray(rng.integers(0, 0x7E, (m, k), dtype=np.uint8))
    bq = cupy.asarray(rng.integers(0, 0x7E, (n, k), dtype=np.uint8))
    rs, cs = cupy.ones(m, np.float32), cupy.ones(n, np.float32)
    gemm.gemm_wgmma(
        aq, bq, fmt="e4m3", row_scale=rs, col_scale=cs, tile_n=192, promote=5, cluster=1
    )
    m = 1000
    host = inputs.out_proj_inputs(m, rows=9, rng=rng)
    wq, wsc = formats.fp8_quantize_per_channel(host["o_weight"])
    args = [cupy.asarray(host[x]) for x in ("attn_out",)] + [cupy.asarray(wq), cupy.asarray(wsc)]
    args += [cupy.asarray(host[x]) for x in ("gate", "gate_index", "residual")]
    for fused in (True, False):
        out_proj.FUSED_QUANT = fused
        out_proj.minimax_h3_fp8_out_proj(*args)
    host = inputs.mlp_inputs(m, rows=9, rng=rng)
    w1q, w1s = formats.fp8_quantize_per_channel(formats.fc1_prepack_rows(host["fc1_weight"]))
    w2q, w2s = formats.fp8_quantize_per_channel(host["fc2_weight"])
    keys = ("x", "x_norm_weight", "adaln_scale", "adaln_shift", "adaln_index", "gate", "residual")
    mlp.minimax_h3_mlp_fp8_sm120(
        *(cupy.asarray(host[x]) for x in keys), *(cupy.asarray(w) for w in (w1q, w1s, w2q, w2s))
    )
    cupy.cuda.Device().synchronize()
    print("memcheck_deferred: 4 paths run")


if __name__ == "__main__":
    main()
