"""GPU, two devices: operands on device 1 while the caller has device 0 current (a process that
drives several GPUs). Every entry point must run on its operands' device (its kernels loaded
there, on that device's current stream) and leave the caller's current device as it was.

Each case builds the same inputs (same seed) on device 1 and on device 0, calls the op on each
with device 0 current, and compares the outputs byte for byte: the kernels are deterministic and
the device-0 call is the one the rest of the suite checks against the float64 references.
Outputs are poisoned first, so a launch that went to the wrong device (and wrote nothing there)
cannot match. Skipped with one GPU.
"""

from __future__ import annotations

import numpy as np
import pytest

pytestmark = pytest.mark.gpu

D = 5376
M = 257  # above 256: the engine's clustered and single-launch forms


def _poison_here(*arrays):
    """Poison arrays of the device current at build time, from a call made with another device
    current (CuPy fills run on the current device, so the array's device is entered first)."""
    import cupy

    from h3cupy.testing import poison

    dev = cupy.cuda.Device().id

    def again():
        with cupy.cuda.Device(dev):
            poison(*arrays)

    return again


def _two_gpus():
    import cupy

    if cupy.cuda.runtime.getDeviceCount() < 2:
        pytest.skip("needs two GPUs (one here): run it on a two-GPU machine")


def _norm_adaln(rng):
    import cupy

    from h3cupy.ops.prologue import norm_adaln
    from h3cupy.reference import inputs
    from h3cupy.testing import upload

    h = inputs.prologue_inputs(M, rows=9, k=D, index_dtype=np.int64, rng=rng)
    d = {k: upload(v) for k, v in h.items()}
    keys = ("x", "x_norm_weight", "adaln_scale", "adaln_shift", "adaln_index")
    q, scale = cupy.empty((M, D), np.uint8), cupy.empty((M,), np.float32)
    poison = _poison_here(q, scale)

    def run():
        poison()
        norm_adaln(*(d[k] for k in keys), out_format="fp8", q=q, scale=scale)
        return [q, scale]

    return run


def _fp8_pre_attention(rng):
    import cupy

    from h3cupy.verify import fp8_pre_attention_runner

    _, _, _, act_q, act_scale, op = fp8_pre_attention_runner(M, "e4m3", rng)
    qkv = {n: cupy.empty((M, 56, 128), np.uint8) for n in "qkv"}
    poison = _poison_here(act_q, act_scale, *qkv.values())

    def run():
        poison()
        op(**qkv)
        return [*qkv.values(), act_q, act_scale]

    return run


def _fp8_out_proj(rng):
    import cupy

    import h3cupy
    from h3cupy import formats
    from h3cupy.reference import inputs
    from h3cupy.testing import upload

    h = inputs.out_proj_inputs(M, rng=rng)
    d = {k: upload(v) for k, v in h.items()}
    out = cupy.empty((M, D), formats.BF16)
    poison = _poison_here(out)

    def run():
        poison()
        wq, ws = h3cupy.quantize_minimax_h3_o_weight_fp8(d["o_weight"])  # a weight helper too
        h3cupy.minimax_h3_fp8_out_proj(
            d["attn_out"], wq, ws, d["gate"], d["gate_index"], d["residual"], out=out
        )
        return [wq, ws, out]

    return run


def _mlp(rng, torch_operands=False):
    import cupy

    import h3cupy
    from h3cupy import formats
    from h3cupy.verify import mlp_fp8_operands

    _, _, dev, weights = mlp_fp8_operands(M, rng)
    args = [*dev.values(), *weights]
    out = cupy.empty((M, D), formats.BF16)
    if torch_operands:
        import torch

        def as_torch(a):
            t = torch.from_dlpack(a.view(cupy.int16) if a.dtype.itemsize == 2 else a)
            return t.view(torch.bfloat16) if a.dtype.itemsize == 2 else t

        args = [as_torch(a) for a in args]
        out = as_torch(out)
    poison = _poison_here(out)

    def run():
        poison()
        return [h3cupy.minimax_h3_mlp_fp8_sm120(*args, out=out)]

    return run


CASES = {
    "norm_adaln": _norm_adaln,
    "fp8_pre_attention": _fp8_pre_attention,
    "fp8_out_proj": _fp8_out_proj,
    "mlp": _mlp,
    "mlp_torch": lambda rng: _mlp(rng, torch_operands=True),
}


def _bytes(a) -> np.ndarray:
    from h3cupy.testing import download

    return np.ascontiguousarray(download(a)).view(np.uint8)


@pytest.mark.parametrize("case", list(CASES))
def test_operands_on_another_device(case):
    import cupy

    from h3cupy.testing import gpu_available

    if not gpu_available():
        pytest.skip("no CUDA GPU")
    _two_gpus()
    if case == "mlp_torch":
        pytest.importorskip("torch")
    seed = int(np.random.SeedSequence().entropy % 2**32)
    got = {}
    for dev in (1, 0):
        with cupy.cuda.Device(dev):
            run = CASES[case](np.random.default_rng(seed))
            cupy.cuda.Device(dev).synchronize()
        with cupy.cuda.Device(0):
            outs = run()
            assert cupy.cuda.runtime.getDevice() == 0, "the call changed the current device"
        with cupy.cuda.Device(dev):
            cupy.cuda.Device(dev).synchronize()
            got[dev] = [_bytes(a) for a in outs]
    for i, (a, b) in enumerate(zip(got[1], got[0], strict=True)):
        assert a.shape == b.shape
        assert np.array_equal(a, b), f"{case}: output {i} on device 1 differs (seed {seed})"
