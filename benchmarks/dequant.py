"""Benchmark: the NVFP4 -> bf16 dequantization launch of the Hopper NVFP4 path
(``h3cupy.ops.gemm.nvfp4_dequantize_bf16``) and the bf16 -> NVFP4 quantization launch
(``fp4_quantize_smxx``: ``h3cupy.fp4_quantize``, the sm_120a NVFP4 out_proj and the Hopper
two-launch form) on their production shapes, against the card's copy bandwidth measured in the
same run. Every NVFP4 op call on sm_90a runs the dequantization on its weight (w', the
128x4-swizzled scales); the two-launch out_proj and the pre-attention also on the activation (a',
linear scales).

    PYTHONPATH=. python3 benchmarks/dequant.py [--json out.json]

Bytes counted: codes and scales read, bf16 written (the quantization: the reverse). GPU time per
call from CUDA-graph replays (``h3cupy.testing.bench_cupy_graph``), two input sets in turn, so that
one call's operands are not in L2 from the call before. The copy is ``benchmarks/prologue.py``'s
(CuPy's copy of 2 GiB); it is below the card's rated bandwidth (CuPy's copy of 1 GiB read 2.45 TB/s
on an H100 in session 46, whose figures this script took with that copy in graph replays).
"""

from __future__ import annotations

import argparse
import datetime
import json

import numpy as np

D, ATTN, QKV = 5376, 7168, 21504
#: (name, rows, K, swizzled scales)
SHAPES = (
    ("out_proj weight", D, ATTN, True),
    ("pre-attention weight", QKV, D, True),
    ("out_proj activation M=4824", 4824, ATTN, False),
    ("out_proj activation M=38592", 38592, ATTN, False),
)
#: the quantization's shapes: (name, rows, K, swizzled scales)
QUANT_SHAPES = (
    ("quantize: out_proj act. M=4824", 4824, ATTN, False),
    ("quantize: out_proj act. M=38592", 38592, ATTN, False),
    ("quantize: out_proj weight", D, ATTN, True),
)


def main() -> None:
    import cupy

    from h3cupy import weights
    from h3cupy.core import arch, interop
    from h3cupy.ops import gemm
    from h3cupy.testing import bench_cupy_graph

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", default=None)
    ap.add_argument("--calls", type=int, default=20)
    args = ap.parse_args()

    from prologue import copy_bandwidth  # benchmarks/ is the script's directory

    rng = np.random.default_rng(0)
    copy_gbps = copy_bandwidth()["gbps"]  # the copy the prologue benchmark measures
    print(f"copy: {copy_gbps:.0f} GB/s (read + write)")
    results = []

    def report(name, rows, k, t):
        nbytes = rows * k // 2 + rows * k // 16 + rows * k * 2
        gbps = nbytes / (t["median_ms"] * 1e-3) / 1e9
        print(
            f"{name:32s} {rows:6d} x {k:5d}  {t['median_ms'] * 1e3:8.1f} us  {gbps:6.0f} GB/s"
            f"  ({gbps / copy_gbps:.2f} of copy)"
        )
        results.append({"name": name, "rows": rows, "K": k, **t, "gbps": gbps})

    for name, rows, k, swizzled in SHAPES:
        sets = []
        for _ in range(2):
            codes = cupy.asarray(rng.integers(0, 256, (rows, k // 2), dtype=np.uint8))
            n_sf = (-(-rows // 128) * 128 if swizzled else rows) * (k // 16)
            sf = cupy.asarray(rng.integers(0x30, 0x48, n_sf, dtype=np.uint8))  # finite scales
            out = cupy.empty((rows, k), cupy.uint16)  # bf16 bits
            sets.append(
                [interop.as_tensor(t, n) for t, n in ((codes, "q"), (sf, "sf"), (out, "out"))]
            )

        def call(i, sets=sets, swizzled=swizzled):
            q, s, o = sets[i % 2]
            gemm.nvfp4_dequantize_bf16(q, s, o, swizzled=swizzled)

        report(name, rows, k, bench_cupy_graph(call, calls=args.calls, rotate=2))

    # the global scale of an amax of 4 (a few blocks saturate: immaterial to the bytes moved)
    g = interop.as_tensor(cupy.asarray(np.array([2688.0 / 4.0], np.float32)), "g")
    for name, rows, k, swizzled in QUANT_SHAPES:
        sets = []
        for _ in range(2):
            a = cupy.random.standard_normal((rows, k), dtype=cupy.float32)
            a_bf = (a.view(cupy.uint32) >> 16).astype(cupy.uint16)  # bf16 bits (truncated)
            del a
            n_sf = (-(-rows // 128) * 128 if swizzled else rows) * (k // 16)
            q = cupy.empty((rows, k // 2), cupy.uint8)
            sf = cupy.zeros(n_sf, cupy.uint8)
            ts = [interop.as_tensor(t, n) for t, n in ((q, "q"), (sf, "sf"))]
            sets.append([interop.as_tensor(a_bf, "a")] + ts)  # (the launch reads bits)

        def qcall(i, sets=sets, swizzled=swizzled):
            a, q, s = sets[i % 2]
            weights._fp4_quantize_launch(a, g, q, s, swizzled)

        report(name, rows, k, bench_cupy_graph(qcall, calls=args.calls, rotate=2))
    if args.json:
        dev = cupy.cuda.Device()
        with open(args.json, "w") as f:
            json.dump(
                {
                    "date": datetime.datetime.now(datetime.timezone.utc).isoformat(),
                    "gpu": cupy.cuda.runtime.getDeviceProperties(dev.id)["name"].decode(),
                    "target": arch.device_target(dev.id),
                    "copy_gbps": copy_gbps,
                    "results": results,
                },
                f,
                indent=1,
            )


if __name__ == "__main__":
    main()
