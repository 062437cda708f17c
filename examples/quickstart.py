"""Quickstart: the shared prologue (RMSNorm + indexed AdaLN -> bf16 / FP8 / NVFP4) and the weight
helpers, checked against the NumPy references.

    python examples/quickstart.py

On a machine with a supported GPU it runs the kernels on production-like inputs and compares
them with h3cupy.reference. Without a GPU it runs the NumPy reference and compiles every kernel
through NVRTC for sm_120a (the RTX 5090 / RTX PRO 6000 target), and says so.
"""

from __future__ import annotations

import time

import numpy as np

import h3cupy
from h3cupy import formats, reference
from h3cupy.reference import inputs
from h3cupy.testing import gpu_available

M, ROWS = 4097, 9


def on_gpu() -> None:
    import cupy

    from h3cupy.ops.prologue import norm_adaln
    from h3cupy.testing import device_info, download, upload

    info = device_info()
    print(f"GPU: {info['gpu']} ({info['target']})")
    host = inputs.prologue_inputs(M, rows=ROWS)
    dev = {
        k: upload(host[k])
        for k in ("x", "x_norm_weight", "adaln_scale", "adaln_shift", "adaln_index")
    }
    args = (
        dev["x"],
        dev["x_norm_weight"],
        dev["adaln_scale"],
        dev["adaln_shift"],
        dev["adaln_index"],
    )
    ref = reference.prologue(
        host["x"],
        host["x_norm_weight"],
        host["adaln_scale"],
        host["adaln_shift"],
        host["adaln_index"],
    )

    a = download(norm_adaln(*args).a).astype(np.float32)
    print(
        f"bf16 prologue  [{M}, 5376]: identical to the reference on "
        f"{np.mean(a == ref):.5%} of elements"
    )

    out = norm_adaln(*args, out_format="fp8", write_bf16=True)
    ka = download(out.a).astype(np.float32)
    q, s = formats.fp8_quantize_per_token(ka)
    print(
        f"FP8 prologue : codes bit-exact to formats.py: "
        f"{np.array_equal(download(out.q).view(np.uint8), q)}, "
        f"scales: {np.array_equal(download(out.scale), s)}"
    )

    g = h3cupy.nvfp4_global_scale_from_amax(8.0)  # calibrated activation amax 8
    out = norm_adaln(*args, out_format="nvfp4", act_global_scale=g, write_bf16=True)
    q, sf = formats.nvfp4_quantize(download(out.a), download(g)[0])
    print(
        f"NVFP4 prologue: codes bit-exact: {np.array_equal(download(out.q), q)}, "
        f"scales: {np.array_equal(download(out.scale), sf)}"
    )

    w = formats.to_bf16(np.random.default_rng().normal(0, 0.01, (5376, 7168)).astype(np.float32))
    wq, ws = h3cupy.quantize_minimax_h3_o_weight_fp8(cupy.asarray(w))
    rq, rs = reference.quantize_minimax_h3_o_weight_fp8(w)
    print(
        f"o_proj FP8 weight: bit-exact to the NumPy twin: "
        f"{np.array_equal(download(wq).view(np.uint8), rq) and np.array_equal(download(ws), rs)}"
    )
    print("For the full check of every operator on this GPU: python -m h3cupy.selftest")


def without_gpu() -> None:
    from h3cupy.core import jit
    from h3cupy.ops import prologue  # noqa: F401  (registers its kernels)

    print("No CUDA GPU here: running the NumPy reference and compiling the kernels for sm_120a.")
    host = inputs.prologue_inputs(129, rows=ROWS)
    a = reference.prologue(
        host["x"],
        host["x_norm_weight"],
        host["adaln_scale"],
        host["adaln_shift"],
        host["adaln_index"],
    )
    q, s = formats.fp8_quantize_per_token(a)
    print(
        f"reference prologue [129, 5376]: mean |a| = {np.abs(a).mean():.4f}, "
        f"FP8 scales in [{s.min():.3g}, {s.max():.3g}]"
    )
    for spec in jit.REGISTRY:
        t0 = time.time()
        res = jit.compile_module(spec, "sm_120a", verbose=True)
        regs = {r["registers"] for r in jit.parse_ptxas_report(res.log).values()}
        print(
            f"compiled {spec.file} for sm_120a: {len(spec.names)} kernels, "
            f"{len(res.cubin)} bytes of cubin, registers {sorted(regs)}, "
            f"{time.time() - t0:.1f} s"
        )
    print(
        "The sm_120a code is compile-checked only; on an SM120 board run "
        "`python -m h3cupy.selftest` first."
    )


if __name__ == "__main__":
    on_gpu() if gpu_available() else without_gpu()
