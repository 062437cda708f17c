"""Session-15 diagnostic (removed after use): gemm_mma_tma(ws=True) with and without the fence
before each stage's release (-DH3_MT_WS_FENCE=0: s15-g's failing build) against the default."""

import cupy
import numpy as np

from h3cupy import formats
from h3cupy.core import arch, jit
from h3cupy.ops import gemm

nofence = jit.ModuleSpec(
    gemm.GEMM_MMA_TMA.file, ("h3::gemm_mma_tma_ws_smxx<0>",), ("H3_MT_WS_FENCE=0",)
)
cubin, lowered = jit.build(nofence, arch.device_target(0))
k_nofence = cupy.RawModule(path=str(cubin)).get_function(lowered[nofence.names[0]])
real = jit.get_kernel
mode = {"nofence": False}


def get_kernel(spec, name, t=None):
    if mode["nofence"] and name == nofence.names[0]:
        return k_nofence
    return real(spec, name, t)


jit.get_kernel = get_kernel
rng = np.random.default_rng(0)
for m, n, k in ((4372, 2952, 2048), (4372, 2952, 1024), (9648, 5376, 5376)):
    a = formats.to_bf16(rng.normal(0, 0.5, (m, k)).astype(np.float32))
    w = formats.to_bf16(rng.normal(0, 0.01, (n, k)).astype(np.float32))
    ad, wd = cupy.asarray(a), cupy.asarray(w)
    res = {}
    for form in ("default", "ws", "ws_nofence"):
        mode["nofence"] = form == "ws_nofence"
        outs = []
        for _ in range(5):
            out = cupy.full((m, n), 0xFFFF, cupy.uint16).view(formats.BF16)
            gemm.gemm_mma_tma(ad, wd, out=out, ws=form != "default")
            outs.append(cupy.asnumpy(out.view(cupy.uint16)))
        same = all((o == outs[0]).all() for o in outs)
        res[form] = outs
        eq = all((o == res["default"][0]).all() for o in outs)
        print(f"{m}x{n}x{k} {form}: 5 runs repeatable {same}, equal to default {eq}", flush=True)
