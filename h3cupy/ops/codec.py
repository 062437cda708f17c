"""``codec_probe``: the device's scalar codecs (cuda_src/include/h3/numeric.cuh) applied element by
element, for tests that compare them with :mod:`h3cupy.formats` on special values. Not an
operator: the quantizers build on these codecs, and this exposes them one at a time."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..core import arch, interop, jit
from ..core.launch import i32, launch, ptr

CODEC_PROBE = jit.ModuleSpec("kernels/codec_probe.cu", ("h3::codec_probe_smxx",))


class CodecProbe(NamedTuple):
    """Device arrays: ``bf16_bits`` uint16 ``[n]``, ``e4m3_code`` / ``ue4m3_code`` / ``e2m1_code``
    uint8 ``[n]`` (the encoders of x), ``e4m3_value`` float32 ``[256]`` (the decoder of every
    code), ``e2m1_pair`` uint32 ``[256]`` (byte c's two e2m1 nibbles decoded to a bf16 pair with
    scale 1, the low nibble in the low half), ``e2m1_scaled`` uint16 ``[256, 16, 8]`` (the
    word-wide decoder, ``e2m1x8_scaled_bf16x8``: eight copies of code c times the e4m3 scale byte
    s, as bf16 bits, at ``[s, c]``)."""

    bf16_bits: object
    e4m3_code: object
    ue4m3_code: object
    e2m1_code: object
    e4m3_value: object
    e2m1_pair: object
    e2m1_scaled: object


def codec_probe(x) -> CodecProbe:
    """Run every scalar codec on ``x`` (a contiguous 1-D float32 ``cupy.ndarray``, n >= 1) and
    every decoder on the 256 byte codes; returns CuPy arrays. Needs an sm_89 or newer GPU (the
    e4m3 conversion). The outputs are allocated here and filled with 0xAB bytes first (a NaN as
    float32), so that an element the kernel did not write cannot pass a comparison."""
    import cupy

    if (
        not isinstance(x, cupy.ndarray)
        or x.dtype != np.float32
        or x.ndim != 1
        or not x.flags.c_contiguous
        or x.size < 1
    ):
        got = f"{x.dtype} {x.shape}" if hasattr(x, "dtype") else type(x).__name__
        raise ValueError(
            f"x: expected a contiguous 1-D float32 cupy.ndarray of at least one element, got "
            f"{got}; pass cupy.ascontiguousarray(x, cupy.float32).ravel()"
        )
    xt = interop.as_tensor(x, "x")
    target = arch.device_target(xt.device)
    if not arch.supports_fp8(target):
        raise RuntimeError(f"codec_probe needs an sm_89 or newer GPU; this one is {target}")
    n = x.size
    with cupy.cuda.Device(xt.device):
        outs = [
            cupy.empty((n,), cupy.uint16),
            cupy.empty((n,), cupy.uint8),
            cupy.empty((n,), cupy.uint8),
            cupy.empty((n,), cupy.uint8),
            cupy.empty((256,), cupy.float32),
            cupy.empty((256,), cupy.uint32),
            cupy.empty((256, 16, 8), cupy.uint16),
        ]
        for t in outs:
            t.view(cupy.uint8).fill(0xAB)
    ts = [interop.as_tensor(t, "output") for t in outs]
    launch(
        jit.get_kernel(CODEC_PROBE, "h3::codec_probe_smxx", target),
        max(1, min((n + 255) // 256, 1024)),
        256,
        (ptr(xt), i32(n), *(ptr(t) for t in ts)),
        tensors=[xt, *ts],
    )
    return CodecProbe(*outs)
