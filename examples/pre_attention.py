"""minimax_h3_bf16_pre_attention on CuPy arrays and on torch tensors.

    python examples/pre_attention.py [M] [P]

On an H100 / H200 (sm_90a) it runs the op on production-shaped inputs (M tokens, Ulysses degree
P), once with CuPy arrays and once with torch tensors (when torch is installed), checks a sample of
rows against the float64 reference (SPEC §8 bounds) and times the op with CUDA events. Without a
supported GPU it runs the NumPy reference on a few rows and compiles the kernels for sm_120a and
sm_90a through NVRTC, and says so.
"""

from __future__ import annotations

import sys

import numpy as np

from h3cupy import reference
from h3cupy.reference import inputs
from h3cupy.testing import gpu_available

KEYS = inputs.PRE_ATTENTION_KEYS  # the op's tensor arguments in call order


def check(host, got: np.ndarray, p: int, rows: np.ndarray) -> float:
    """Worst |err| / bound over the sampled rows (<= 1 passes)."""
    from h3cupy.verify import pre_attention_bound

    ref = reference.minimax_h3_bf16_pre_attention(
        host["x"][rows],
        *(host[k] for k in KEYS[1:4]),
        host["adaln_index"][rows],
        *(host[k] for k in KEYS[5:]),
        ulysses_degree=p,
        rope_positions=rows.astype(np.int64),
    )
    err = np.abs(got[:, rows].astype(np.float64) - ref)
    return float((err / pre_attention_bound(ref)).max())


def on_gpu(m: int, p: int) -> None:
    import cupy

    import h3cupy
    from h3cupy.formats import BF16
    from h3cupy.testing import download, upload

    host = inputs.pre_attention_inputs(m, rows=9)
    rows = np.unique(np.r_[0, m - 1, np.random.default_rng(0).choice(m, 32)])

    # 1. CuPy arrays (bf16 as ml_dtypes.bfloat16); the AdaLN tables are column chunks of the
    #    [rows, 6 * 5376] modulation projection, passed as the strided views they are.
    dev = {k: upload(host[k]) for k in KEYS}
    out = cupy.empty((p, m, 56 // p, 3, 128), BF16)
    ws = cupy.empty((m, 5376), BF16)
    h3cupy.minimax_h3_bf16_pre_attention(
        *(dev[k] for k in KEYS), ulysses_degree=p, out=out, workspace=ws
    )
    worst = check(host, download(out).astype(np.float32), p, rows)
    print(
        f"CuPy  : out {list(out.shape)}, worst |err| / SPEC bound on {rows.size} rows = {worst:.3f}"
    )
    start, stop = cupy.cuda.Event(), cupy.cuda.Event()
    start.record()
    for _ in range(10):
        h3cupy.minimax_h3_bf16_pre_attention(
            *(dev[k] for k in KEYS), ulysses_degree=p, out=out, workspace=ws
        )
    stop.record()
    stop.synchronize()
    print(f"        {cupy.cuda.get_elapsed_time(start, stop) / 10:.3f} ms per call (M={m}, P={p})")

    # 2. torch tensors: outputs come back as torch tensors, on torch's current stream.
    try:
        import torch
    except ImportError:
        print("torch : not installed, skipped")
        return

    def t(a):
        a = np.ascontiguousarray(a)
        if a.dtype == BF16:
            return torch.from_numpy(a.view(np.int16)).cuda().view(torch.bfloat16)
        return torch.from_numpy(a).cuda()

    mod = t(host["modulation"])
    targs = [t(host[k]) for k in KEYS]
    targs[2], targs[3] = mod[:, 5376:10752], mod[:, 0:5376]  # scale, shift chunks
    tout = torch.empty((p, m, 56 // p, 3, 128), dtype=torch.bfloat16, device="cuda")
    res = h3cupy.minimax_h3_bf16_pre_attention(*targs, ulysses_degree=p, out=tout)
    assert res is tout
    worst = check(host, download(tout).astype(np.float32), p, rows)
    print(f"torch : out {tuple(tout.shape)} {tout.dtype}, worst |err| / bound = {worst:.3f}")


def without_gpu() -> None:
    from h3cupy.core import jit
    from h3cupy.ops import pre_attention

    print("No CUDA GPU here: running the NumPy reference and compiling the kernels instead.")
    host = inputs.pre_attention_inputs(4, rows=9)
    out = reference.minimax_h3_bf16_pre_attention(*(host[k] for k in KEYS), ulysses_degree=8)
    print(f"reference pre-attention for M=4, P=8: out {list(out.shape)}")
    for target in ("sm_120a", "sm_90a"):
        res = jit.compile_module(pre_attention.PRE_ATTENTION, target)
        print(
            f"compiled {pre_attention.PRE_ATTENTION.file} for {target}: "
            f"{len(res.lowered)} kernels, {len(res.cubin)} bytes"
        )


def main() -> None:
    m = int(sys.argv[1]) if len(sys.argv) > 1 else 4824
    p = int(sys.argv[2]) if len(sys.argv) > 2 else 8
    if gpu_available():
        from h3cupy.core import arch

        if arch.current_target() == "sm_90a":
            on_gpu(m, p)
            return
        print(f"this GPU is {arch.current_target()}; the op runs on sm_90a in this version")
    without_gpu()


if __name__ == "__main__":
    main()
