"""A/B of the TMA-fed mma.sync back end (``gemm.gemm_mma_tma``, bf16): single CTAs against
clusters of two multicasting B (``cluster=2``), in one run: graph replays interleaved (and,
``--energy``, sustained windows: cycles, clock and energy per call), the output bytes of both
compared. A diagnostic, not a test.

    PYTHONPATH=. python3 scripts/ab_mma_tma.py [--m 4824 38592] [--shapes qkv o] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

#: form name -> gemm_mma_tma keywords
FORMS = {"x1": {"cluster": 1}, "x2": {"cluster": 2}}
#: N x K of the H3 GEMM shapes
SHAPES = {"qkv": (21504, 5376), "o": (5376, 7168), "fc1": (28672, 5376), "fc2": (5376, 14336)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--m", type=int, nargs="+", default=[4824, 38592])
    ap.add_argument("--shapes", nargs="+", default=["qkv", "o"], choices=sorted(SHAPES))
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--energy", action="store_true")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()

    import torch

    from h3cupy.ops import gemm
    from h3cupy.testing import bench_graphs

    def operands(m, n, k):
        """(on(form) -> a graph-capturable call of that form, the output)."""
        a = (torch.randn(m, k, device="cuda") * 0.5).bfloat16()
        b = (torch.randn(n, k, device="cuda") * 0.01).bfloat16()
        out = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)

        def on(form):
            def fn(i):
                gemm.gemm_mma_tma(a, b, fmt="bf16", out=out, **FORMS[form])

            return fn

        return on, out

    rows = []
    for m in args.m:
        for shape in args.shapes:
            n, k = SHAPES[shape]
            on, out = operands(m, n, k)
            fns = {f: on(f) for f in FORMS}
            t = bench_graphs(fns, reps=args.reps, energy=args.energy)
            fns["x1"](0)
            ref = out.clone()
            flops = 2.0 * m * n * k
            for name, fn in fns.items():
                same = None
                if name != "x1":  # the same bytes as the single-CTA form
                    out.fill_(float("nan"))
                    fn(0)
                    same = bool(torch.equal(ref.view(torch.int16), out.view(torch.int16)))
                r = t[name]
                row = {
                    "shape": shape,
                    "M": m,
                    "form": name,
                    "median_ms": r["median_ms"],
                    "tflops": flops / r["median_ms"] / 1e9,
                    "vs_x1": t["x1"]["median_ms"] / r["median_ms"],
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
                    f"TFLOP/s, {row['vs_x1']:.3f}x x1; same bytes {same}{extra}",
                    flush=True,
                )
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": rows}, indent=1))


if __name__ == "__main__":
    sys.exit(main())
