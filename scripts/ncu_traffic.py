"""Driver for `scripts/profile_ncu.sh traffic`: GEMMs of the engine (and their cuBLAS baselines)
at H3 shapes, each launched a few times after a warm-up, with the profiler started so that ncu
sees only those launches, in the order of the cases given.

    PYTHONPATH=. python3 scripts/ncu_traffic.py "FMT SHAPE M [cluster=C] [group=G] [base] [n=3]" ...

One argument per case. ``cluster=C``: the 192-column FP8 tiles on single CTAs (1) or in clusters
of two (2, B multicast); ``group=G``: the engine module built with -DH3_GROUP_M=G (the tile order
grouped by G M-tiles; probe_engine.py's A/B builds, from the same cache); ``backend=mma_tma``
(bf16): the TMA-fed mma.sync back end (``gemm.gemm_mma_tma``) instead of the wgmma engine;
``base``: then the cuBLAS baseline (`torch._scaled_mm` row-wise for e4m3, `torch.mm` for bf16);
``n``: launches of each.
"""

from __future__ import annotations

import sys
from pathlib import Path

#: K x N of the H3 GEMM shapes (as benchmarks/gemm.py)
SHAPES = {"qkv": (5376, 21504), "o": (7168, 5376), "fc1": (5376, 28672), "fc2": (14336, 5376)}


def _group_kernels(group: int):
    """get_kernel for the engine module's -DH3_GROUP_M=`group` build (its A/B kernels)."""
    import cupy

    from h3cupy.core import arch, jit
    from h3cupy.ops import gemm

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from probe_engine import probe_specs  # the A/B build's kernels (prebuilt by --prebuild)

    spec = gemm.GEMM_WGMMA
    ab = probe_specs((f"H3_GROUP_M={group}",), True)[spec]
    cubin, lowered = jit.build(ab, arch.device_target(0))
    module = cupy.RawModule(path=str(cubin))
    real = jit.get_kernel

    def get_kernel(s, name, t=None):
        if s is spec:
            return module.get_function(lowered[name])
        return real(s, name, t)

    return get_kernel


def case(text: str):
    """The (ours, base-or-None, launches) callables of one case."""
    import torch

    from h3cupy.core import jit
    from h3cupy.ops import gemm

    fmt, shape, m, *rest = text.split()
    m = int(m)
    opts = dict(a.split("=") if "=" in a else (a, "1") for a in rest)
    k, n = SHAPES[shape]
    kw = {}
    if "cluster" in opts:
        kw = {"tile_n": 192, "promote": gemm.FP8_PROMOTE, "cluster": int(opts["cluster"])}
    getter = _group_kernels(int(opts["group"])) if "group" in opts else jit.get_kernel
    a = torch.randn(m, k, device="cuda") * 0.5
    b = torch.randn(n, k, device="cuda") * 0.01
    out = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
    if fmt == "bf16":
        a, b = a.bfloat16(), b.bfloat16()

        def run():
            if opts.get("backend") == "mma_tma":
                gemm.gemm_mma_tma(a, b, fmt="bf16", out=out)
            else:
                gemm.gemm_wgmma(a, b, fmt="bf16", out=out)

        def base():
            torch.mm(a, b.t())
    else:
        sa = a.abs().amax(1, keepdim=True) / 448
        sb = b.abs().amax(1, keepdim=True) / 448
        qa, qb = (a / sa).to(torch.float8_e4m3fn), (b / sb).to(torch.float8_e4m3fn)
        rs, cs = sa.reshape(-1).contiguous(), sb.reshape(-1).contiguous()

        def run():
            gemm.gemm_wgmma(qa, qb, fmt="e4m3", row_scale=rs, col_scale=cs, out=out, **kw)

        def base():
            torch._scaled_mm(qa, qb.t(), scale_a=sa, scale_b=sb.t(), out_dtype=torch.bfloat16)

    def ours():
        real, jit.get_kernel = jit.get_kernel, getter
        try:
            run()
        finally:
            jit.get_kernel = real

    return ours, (base if "base" in opts else None), int(opts.get("n", 3))


def main() -> None:
    import torch

    for text in sys.argv[1:]:
        ours, base, n = case(text)
        fns = [ours] + ([base] if base else [])
        for fn in fns:
            fn()
        torch.cuda.synchronize()
        print(f"== case {text}: {n} launches of the engine" + (", then cuBLAS" if base else ""))
        torch.cuda.profiler.start()
        for fn in fns:
            for _ in range(n):
                fn()
        torch.cuda.synchronize()
        torch.cuda.profiler.stop()
        del ours, base, fns
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
