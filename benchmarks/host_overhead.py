"""Host (Python) cost of one h3cupy call: back-to-back eager calls of a tiny problem, so that
the wall time per call is the launch path's own time, plus a cProfile of where it goes.

    PYTHONPATH=. python3 benchmarks/host_overhead.py [--calls 2000] [--profile]
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import time


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--profile", action="store_true")
    args = ap.parse_args()

    import cupy
    import ml_dtypes
    import torch

    from h3cupy.ops import gemm

    a = torch.randn(1, 1024, device="cuda").bfloat16()
    b = torch.randn(256, 1024, device="cuda").bfloat16()
    out = torch.empty(1, 256, device="cuda", dtype=torch.bfloat16)
    ca, cb, cout = (cupy.asarray(t.view(torch.int16)).view(ml_dtypes.bfloat16) for t in (a, b, out))
    cases = {
        "torch.mm (reference)": lambda: torch.mm(a, b.t(), out=out),
        "gemm_wgmma torch": lambda: gemm.gemm_wgmma(a, b, out=out),
        "gemm_wgmma cupy": lambda: gemm.gemm_wgmma(ca, cb, out=cout),
    }
    for name, fn in cases.items():
        for _ in range(20):
            fn()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(args.calls):
            fn()
        torch.cuda.synchronize()
        us = (time.perf_counter() - t0) / args.calls * 1e6
        print(f"{name:<24} {us:8.1f} us/call")
    if args.profile:
        prof = cProfile.Profile()
        prof.enable()
        for _ in range(args.calls):
            gemm.gemm_wgmma(a, b, out=out)
        prof.disable()
        torch.cuda.synchronize()
        s = io.StringIO()
        pstats.Stats(prof, stream=s).sort_stats("tottime").print_stats(25)
        print(s.getvalue())


if __name__ == "__main__":
    main()
