"""GPU: one MMA atom per kind against NumPy on fresh random operands, which checks the fragment
maps (mma_sync.cuh) that the GEMM engine is built on. The block-scaled kinds run only on sm_120a.

Bound: the products of bf16 / e4m3 values are exact in fp32, so the only error is the fp32
accumulation order of 16 (bf16) or 32 (e4m3) terms: |D - ref| <= 32 * 2^-23 * sum|a*b|.
"""

from __future__ import annotations

import numpy as np
import pytest

from h3cupy import formats

pytestmark = pytest.mark.gpu


def _run(kind, a_bytes, b_bytes, sfa=0, sfb=0):
    import cupy

    from h3cupy.ops.gemm import mma_probe
    from h3cupy.testing import download

    return download(mma_probe(kind, cupy.asarray(a_bytes), cupy.asarray(b_bytes), sfa, sfb))


def _check(d, a, b):
    ref = a.astype(np.float64) @ b.astype(np.float64).T
    bound = 32 * 2.0**-23 * (np.abs(a).astype(np.float64) @ np.abs(b).astype(np.float64).T)
    assert np.all(np.isfinite(d))
    assert np.all(np.abs(d - ref) <= bound + 1e-30), np.max(np.abs(d - ref) - bound)


def test_bf16_atom(rng):
    a = formats.to_bf16(rng.normal(0, 1, (16, 16)).astype(np.float32))
    b = formats.to_bf16(rng.normal(0, 1, (8, 16)).astype(np.float32))
    d = _run("bf16", a.view(np.uint8).reshape(16, 32), b.view(np.uint8).reshape(8, 32))
    _check(d, a.astype(np.float32), b.astype(np.float32))


def test_e4m3_atom(rng):
    a = formats.e4m3_encode(rng.normal(0, 8, (16, 32)).astype(np.float32))
    b = formats.e4m3_encode(rng.normal(0, 8, (8, 32)).astype(np.float32))
    d = _run("e4m3", a, b)
    _check(d, formats.e4m3_decode(a), formats.e4m3_decode(b))


def test_block_scaled_atoms_with_unit_scales(rng):
    from h3cupy.core import arch

    if not arch.current_target().startswith("sm_12"):
        pytest.skip("the block-scaled MMA atoms exist on sm_120a only (compile-checked in CI)")
    a = formats.e4m3_encode(rng.normal(0, 8, (16, 32)).astype(np.float32))
    b = formats.e4m3_encode(rng.normal(0, 8, (8, 32)).astype(np.float32))
    # ue8m0 0x7F = 2^0: the mxf8f6f4 form must equal the legacy product (SPEC section 6)
    d = _run("mxf8f6f4", a, b, 0x7F7F7F7F, 0x7F7F7F7F)
    _check(d, formats.e4m3_decode(a), formats.e4m3_decode(b))
    ca = formats.e2m1_encode(rng.normal(0, 2, (16, 64)).astype(np.float32))
    cb = formats.e2m1_encode(rng.normal(0, 2, (8, 64)).astype(np.float32))
    # ue4m3 0x38 = 1.0 in every block: the plain e2m1 product
    d = _run("mxf4nvf4", formats.pack_e2m1(ca), formats.pack_e2m1(cb), 0x38383838, 0x38383838)
    _check(d, formats.e2m1_decode(ca), formats.e2m1_decode(cb))
