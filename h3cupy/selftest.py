"""``python -m h3cupy.selftest``: run every operator available on this GPU against the NumPy
references with the SPEC.md section 8 bounds, on small and production shapes, and print one table.

On a board h3cupy was only compile-checked for (SM120), run this first: it is how you learn
whether the code works on your GPU. Exit status 0 when every row passes.

    python -m h3cupy.selftest            # small and production shapes
    python -m h3cupy.selftest --quick    # small shapes only
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m h3cupy.selftest", description=__doc__.split("\n")[0]
    )
    ap.add_argument("--quick", action="store_true", help="small shapes only")
    args = ap.parse_args(argv)

    from . import testing

    if not testing.gpu_available():
        print("h3cupy selftest: no CUDA GPU found; nothing to run (the CPU tests are in tests/).")
        return 1
    from . import verify
    from .core import arch

    info = testing.device_info()
    target = info["target"]
    print(
        f"h3cupy selftest on {info['gpu']} ({target}, CuPy {info['cupy']}, NVRTC {info['nvrtc']})"
    )
    rng = np.random.default_rng()
    prologue_shapes = [(1, 9), (129, 1), (4097, 12)] + ([] if args.quick else [(38592, 9)])
    fmts = ("bf16", "fp8", "nvfp4") if arch.supports_fp8(target) else ("bf16",)
    results = []
    t0 = time.time()
    for m, rows in prologue_shapes:
        results += verify.check_prologue(m, rows, np.int64, rng, formats_=fmts)
    if arch.supports_fp8(target) and not args.quick:
        results += verify.check_weight_helpers(rng)
    if target in ("sm_90a", "sm_120a"):
        # The BF16 pre-attention op (wgmma on sm_90a, the mma.sync back end on sm_120a).
        for m in (129,) + (() if args.quick else (4824,)):
            results += verify.check_pre_attention_bf16(m, (8, 1), rng)
    if target == "sm_90a":
        # The FP8 ops (sm_90a in this version).
        for m in (129,) + (() if args.quick else (4824,)):
            for mode in ("bf16", "e4m3", "nvfp4"):
                results += verify.check_pre_attention_fp8(m, mode, rng)
            results += verify.check_out_proj_fp8(m, rng)
            results += verify.check_mlp_fp8(m, rng)
    if target in ("sm_90a", "sm_120a"):
        # NVFP4 (native block-scaled MMA on sm_120a, exact bf16 emulation on sm_90a).
        results += verify.check_out_proj_nvfp4(129, rng)
        results += verify.check_pre_attention_nvfp4(129, "bf16", rng)
    print(f"{'op':<34} {'shape':<28} {'metric':<26} {'value':>11} {'bound':>10}  result")
    for r in results:
        print(r.row())
    failed = [r for r in results if not r.passed]
    print(
        f"{len(results) - len(failed)} passed, {len(failed)} failed "
        f"({time.time() - t0:.0f} s, target {target})"
    )
    return 0 if not failed else 2


if __name__ == "__main__":
    sys.exit(main())
