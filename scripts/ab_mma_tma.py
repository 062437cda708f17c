"""A/B of the TMA-fed mma.sync back end (``gemm.gemm_mma_tma``, bf16) against builds of the same
kernel with other compile-time defines, in one run: graph replays interleaved (and, ``--energy``,
sustained windows: cycles, clock and energy per call), the output bytes of every build compared
with the default's. A diagnostic, not a test.

    PYTHONPATH=. python3 scripts/ab_mma_tma.py [--m 4824 38592] [--shapes qkv o] [--json out.json]
    PYTHONPATH=. python3 scripts/ab_mma_tma.py --prebuild sm_90a   # fill the cache, no GPU

Builds (``BUILDS``): ``old``, the main loop before session 15 (``-DH3_MT_PIPE=0``: each k-step
loads its fragments, then multiplies; a k-tile's first MMAs wait on its full barrier and
ldmatrix); ``mid``, the pipelined loop with thread 0's loads issued at the k-tile's third
k-step instead of its first (``-DH3_MT_PRODUCE_KS=2``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

#: build name -> extra defines
BUILDS = {"old": ("H3_MT_PIPE=0",), "mid": ("H3_MT_PRODUCE_KS=2",)}
#: N x K of the H3 GEMM shapes
SHAPES = {"qkv": (21504, 5376), "o": (5376, 7168), "fc1": (28672, 5376), "fc2": (5376, 14336)}


def build_specs():
    from h3cupy.core import jit
    from h3cupy.ops import gemm

    base = gemm.GEMM_MMA_TMA
    names = ("h3::gemm_mma_tma_smxx<0>",)
    return {b: jit.ModuleSpec(base.file, names, base.defines + d) for b, d in BUILDS.items()}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--m", type=int, nargs="+", default=[4824, 38592])
    ap.add_argument("--shapes", nargs="+", default=["qkv", "o"], choices=sorted(SHAPES))
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--energy", action="store_true")
    ap.add_argument("--json", default=None)
    ap.add_argument("--prebuild", default=None, metavar="TARGET")
    args = ap.parse_args()

    from h3cupy.core import jit

    specs = build_specs()
    if args.prebuild:
        for s in specs.values():
            print(jit.build(s, args.prebuild)[0].name, flush=True)
        return

    import cupy
    import torch

    from h3cupy.core import arch
    from h3cupy.ops import gemm
    from h3cupy.testing import bench_graphs

    target = arch.device_target(0)
    kernels = {}
    for b, s in specs.items():
        cubin, lowered = jit.build(s, target)
        kernels[b] = cupy.RawModule(path=str(cubin)).get_function(lowered[s.names[0]])
    real_get = jit.get_kernel
    active = {"build": None}

    def get_kernel(spec, name, t=None):
        if active["build"] and spec is gemm.GEMM_MMA_TMA and name == specs["old"].names[0]:
            return kernels[active["build"]]
        return real_get(spec, name, t)

    jit.get_kernel = get_kernel

    def operands(m, n, k):
        """(fn(build) -> a graph-capturable call on that build, the output)."""
        a = (torch.randn(m, k, device="cuda") * 0.5).bfloat16()
        b = (torch.randn(n, k, device="cuda") * 0.01).bfloat16()
        out = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)

        def on(build):
            def fn(i):
                active["build"] = build
                try:
                    gemm.gemm_mma_tma(a, b, fmt="bf16", out=out)
                finally:
                    active["build"] = None

            return fn

        return on, out

    rows = []
    for m in args.m:
        for shape in args.shapes:
            n, k = SHAPES[shape]
            on, out = operands(m, n, k)
            fns = {"default": on(None)} | {b: on(b) for b in BUILDS}
            t = bench_graphs(fns, reps=args.reps, energy=args.energy)
            fns["default"](0)
            ref = out.clone()
            flops = 2.0 * m * n * k
            for name, fn in fns.items():
                same = None
                if name != "default":  # the same bytes as the default build
                    out.fill_(float("nan"))
                    fn(0)
                    same = bool(torch.equal(ref.view(torch.int16), out.view(torch.int16)))
                r = t[name]
                row = {
                    "shape": shape,
                    "M": m,
                    "build": name,
                    "median_ms": r["median_ms"],
                    "tflops": flops / r["median_ms"] / 1e9,
                    "vs_default": t["default"]["median_ms"] / r["median_ms"],
                    "same_bytes": same,
                }
                for key in ("sustained_ms", "clock_mhz", "mcycles", "energy_mj", "power_w"):
                    if key in r:
                        row[key] = r[key]
                rows.append(row)
                extra = (
                    f", sustained {row['mcycles']:.2f} Mcycles at {row['clock_mhz']:.0f} MHz "
                    f"({flops / row['sustained_ms'] / 1e9:.0f} TFLOP/s), {row['energy_mj']:.0f} mJ"
                    if "mcycles" in row
                    else ""
                )
                print(
                    f"{shape:<4}{m:>7} {name:<8} {r['median_ms']:.4f} ms {row['tflops']:6.1f} "
                    f"TFLOP/s, {row['vs_default']:.3f}x default; same bytes {same}{extra}",
                    flush=True,
                )
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": rows}, indent=1))


if __name__ == "__main__":
    sys.exit(main())
