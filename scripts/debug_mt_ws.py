"""Session-15 diagnostic (removed after use): where gemm_mma_tma(ws=True) and the default differ."""

import cupy
import numpy as np

from h3cupy import formats
from h3cupy.ops import gemm

rng = np.random.default_rng(0)
for m, n, k in ((4372, 2952, 2048), (4372, 2952, 1024), (1024, 2952, 2048), (4372, 512, 2048)):
    a = formats.to_bf16(rng.normal(0, 0.5, (m, k)).astype(np.float32))
    w = formats.to_bf16(rng.normal(0, 0.01, (n, k)).astype(np.float32))
    ref = a.astype(np.float64) @ w.astype(np.float64).T
    ad, wd = cupy.asarray(a), cupy.asarray(w)
    res = {}
    for ws in (False, True):
        outs = []
        for _ in range(3):
            out = cupy.full((m, n), 0xFFFF, cupy.uint16).view(formats.BF16)
            gemm.gemm_mma_tma(ad, wd, out=out, ws=ws)
            outs.append(cupy.asnumpy(out.view(cupy.uint16)))
        same = all((o == outs[0]).all() for o in outs)
        got = outs[0].view(formats.BF16).astype(np.float64)
        err = np.abs(got - ref) / np.abs(ref).max()
        res[ws] = outs[0]
        print(
            f"{m}x{n}x{k} ws={ws}: repeatable {same}, max err {np.nanmax(err):.2e}, "
            f"nan {int(np.isnan(got).sum())}"
        )
    d = res[False] != res[True]
    if d.any():
        r, c = np.nonzero(d)
        print(
            f"   differ at {d.sum()} elements: rows {r.min()}..{r.max()} ({len(set(r // 128))} "
            f"M-tiles), cols {c.min()}..{c.max()} ({len(set(c // 256))} N-tiles); "
            f"sample tiles {sorted(set(zip(r // 128, c // 256, strict=True)))[:8]}"
        )
