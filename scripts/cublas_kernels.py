"""Which kernels cuBLAS runs for the baselines on this card (torch.profiler, no Nsight needed):
``torch._scaled_mm`` (FP8, row-wise scales, the FP8 ops' bare GEMM baselines) and ``torch.mm``
(bf16) at the H3 GEMM shapes, M = 4824 and 38592; each kernel's name and its mean time over 5
calls. Session 31 found `_scaled_mm` taking 22% more clock cycles per call at M = 38592 on an
H100 than on an H200 (benchmarks/NOTES.md): a different kernel choice per card is one reason
this script can confirm or rule out.

    PYTHONPATH=. python3 scripts/cublas_kernels.py [--json out.json]
"""

from __future__ import annotations

import argparse
import json

SHAPES = {"qkv": (5376, 21504), "o": (7168, 5376), "fc1": (5376, 28672), "fc2": (14336, 5376)}


def profile_shape(m: int, k: int, n: int) -> list[tuple[str, str, float]]:
    """(baseline, kernel name, mean us) of ``_scaled_mm`` and ``torch.mm`` at [m, k] x [n, k]^T."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    a = torch.randn(m, k, device="cuda").bfloat16()
    b = (torch.randn(n, k, device="cuda") * 0.01).bfloat16()
    a8, b8 = a.to(torch.float8_e4m3fn), b.to(torch.float8_e4m3fn)
    sa = torch.rand(m, 1, device="cuda") + 0.5
    sb = torch.rand(1, n, device="cuda") + 0.5
    calls = {
        "scaled_mm": lambda: torch._scaled_mm(
            a8, b8.t(), scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16
        ),
        "mm": lambda: torch.mm(a, b.t()),
    }
    out = []
    for what, fn in calls.items():
        for _ in range(3):  # warm: heuristics, workspace
            fn()
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(5):
                fn()
            torch.cuda.synchronize()
        for ev in prof.key_averages():
            if ev.device_type.name == "CUDA" and ev.count >= 5:
                out.append((what, ev.key, ev.device_time_total / ev.count))
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--m", type=int, nargs="+", default=[4824, 38592])
    ap.add_argument("--json", default=None)
    args = ap.parse_args()

    import torch

    rows = []
    print(torch.cuda.get_device_name(), flush=True)
    for m in args.m:
        for name, (k, n) in SHAPES.items():
            for what, kernel, us in profile_shape(m, k, n):
                rows.append(dict(op=what, shape=name, M=m, kernel=kernel, us=us))
                print(f"{what:<10}{name:<5}{m:>7}  {us:9.1f} us  {kernel}", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
