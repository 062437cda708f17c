"""GPU: the RMSNorm + AdaLN prologue (bf16 / FP8 / NVFP4 outputs) against the NumPy reference.

Bounds (issue #2, SPEC section 8): bf16 activation within 1 bf16 ulp of the reference and
identical on >= 99.9% of elements; FP8 / NVFP4 codes and scales bit-exact to formats.py applied
to the kernel's own bf16 activation; invalid-index rows exactly zero. Every output is poisoned
before its launch (h3cupy.verify).
"""

from __future__ import annotations

import numpy as np
import pytest

from h3cupy.verify import (
    check_prologue,  # at module level: a missing name fails collection on CPU too
)

pytestmark = pytest.mark.gpu

CASES = [
    (m, rows, idx)
    for m in (1, 127, 128, 129, 4097, 38592)
    for rows, idx in ((1, np.int32), (9, np.int64), (12, np.int32))
]


@pytest.mark.parametrize(
    ("m", "rows", "index_dtype"),
    CASES,
    ids=[f"M{m}-rows{r}-{np.dtype(i).name}" for m, r, i in CASES],
)
def test_prologue(m, rows, index_dtype, rng):

    results = check_prologue(m, rows, index_dtype, rng)
    bad = [r.row() for r in results if not r.passed]
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("m", (1, 129, 4097, 38592))
def test_prologue_two_ctas_per_sm(m, rng, monkeypatch):
    """The prologue built for two resident CTAs per SM (prologue.CTAS_PER_SM = 2: 67-69
    registers, a grid of 2 per SM; the sm_90a default is 3), same checks."""
    from h3cupy.ops import prologue

    monkeypatch.setattr(prologue, "CTAS_PER_SM", 2)
    results = check_prologue(m, 9, np.int64, rng)
    bad = [r.row() for r in results if not r.passed]
    assert not bad, "\n".join(bad)


def test_prologue_int64_rows9_int32_equivalent(rng):
    """The same indices as int32 and as int64 give bitwise the same activation."""
    import cupy

    from h3cupy.ops.prologue import norm_adaln
    from h3cupy.reference import inputs
    from h3cupy.testing import upload

    h = inputs.prologue_inputs(257, rows=9, k=5376, index_dtype=np.int64, rng=rng)
    d = {k: upload(v) for k, v in h.items()}
    a64 = norm_adaln(
        d["x"], d["x_norm_weight"], d["adaln_scale"], d["adaln_shift"], d["adaln_index"]
    ).a
    a32 = norm_adaln(
        d["x"],
        d["x_norm_weight"],
        d["adaln_scale"],
        d["adaln_shift"],
        d["adaln_index"].astype(cupy.int32),
    ).a
    assert bool((a64.view(cupy.uint16) == a32.view(cupy.uint16)).all())


def test_prologue_strided_equals_dense(rng):
    """Column-chunk table views give exactly what dense copies give."""
    import cupy

    from h3cupy.ops.prologue import norm_adaln
    from h3cupy.reference import inputs
    from h3cupy.testing import upload

    h = inputs.prologue_inputs(300, rows=9, k=5376, index_dtype=np.int64, rng=rng)
    d = {k: upload(v) for k, v in h.items()}
    assert d["adaln_scale"].strides[0] != 5376 * 2, "inputs should be strided views"
    a1 = norm_adaln(
        d["x"], d["x_norm_weight"], d["adaln_scale"], d["adaln_shift"], d["adaln_index"]
    ).a
    a2 = norm_adaln(
        d["x"],
        d["x_norm_weight"],
        cupy.ascontiguousarray(d["adaln_scale"]),
        cupy.ascontiguousarray(d["adaln_shift"]),
        d["adaln_index"],
    ).a
    assert bool((a1.view(cupy.uint16) == a2.view(cupy.uint16)).all())


def test_prologue_deterministic(rng):
    import cupy

    from h3cupy.ops.prologue import norm_adaln
    from h3cupy.reference import inputs
    from h3cupy.testing import upload

    h = inputs.prologue_inputs(4097, rows=9, k=5376, index_dtype=np.int64, rng=rng)
    d = {k: upload(v) for k, v in h.items()}
    g = cupy.asarray(np.array([336.0], np.float32))
    runs = [
        norm_adaln(
            d["x"],
            d["x_norm_weight"],
            d["adaln_scale"],
            d["adaln_shift"],
            d["adaln_index"],
            out_format="nvfp4",
            act_global_scale=g,
            write_bf16=True,
        )
        for _ in range(3)
    ]
    for r in runs[1:]:
        for a, b in zip(r, runs[0], strict=True):
            assert bool((a.view(cupy.uint8) == b.view(cupy.uint8)).all())


def _prologue_nan_rows(rng, **kw):
    """The prologue at M = 1000 on inputs with a NaN in x (one token: its RMSNorm row is NaN) and
    a NaN in one column of an AdaLN shift row (one element of every token using that row), run
    with ``write_bf16`` and the output keywords ``kw``. Checks that exactly those tokens' bf16
    activation holds a NaN and returns (activation, the x token's index)."""
    from h3cupy.ops.prologue import norm_adaln
    from h3cupy.reference import inputs
    from h3cupy.testing import download, upload

    h = inputs.prologue_inputs(1000, rows=9, k=5376, index_dtype=np.int64, rng=rng)
    idx = h["adaln_index"]
    valid = np.flatnonzero((idx >= 0) & (idx < 9))  # an invalid index gives a zero row
    x_row, shift_row = int(valid[3]), int(idx[valid[len(valid) // 2]])
    h["x"].view(np.uint16)[x_row, 17] = 0xFFC1  # -NaN
    h["adaln_shift"].view(np.uint16)[shift_row, 40] = 0x7FC0  # +NaN
    d = {k: upload(v) for k, v in h.items()}
    keys = ("x", "x_norm_weight", "adaln_scale", "adaln_shift", "adaln_index")
    out = norm_adaln(*(d[k] for k in keys), write_bf16=True, **kw)
    a = download(out.a)
    nan_rows = np.flatnonzero(np.isnan(a.astype(np.float32)).any(axis=1))
    want_rows = np.union1d([x_row], np.flatnonzero(idx == shift_row))
    assert np.array_equal(nan_rows, want_rows), (nan_rows, want_rows)
    return a, x_row


def test_prologue_fp8_nan_rows(rng):
    """A token whose activation holds a NaN quantizes as formats.py's per-token FP8 does (np.max
    keeps the NaN): scale NaN, every code a NaN code (0x7f / 0xff). Two ways in
    (_prologue_nan_rows): a NaN in x and a NaN in an AdaLN shift row. Every other token
    bit-exact to formats.py applied to the kernel's own bf16 activation. Outputs prefilled with
    non-NaN values, so that an unwritten NaN row cannot pass."""
    import cupy

    from h3cupy.testing import assert_fp8_nan_rows, download

    q = cupy.full((1000, 5376), 0x11, np.uint8)
    sc = cupy.full((1000,), -1.0, np.float32)
    a, _ = _prologue_nan_rows(rng, out_format="fp8", q=q, scale=sc)
    nan_rows = np.flatnonzero(np.isnan(a.astype(np.float32)).any(axis=1))
    assert_fp8_nan_rows(download(q), download(sc), a, nan_rows)


def test_prologue_nvfp4_nan_blocks(rng):
    """The NVFP4 output of tokens whose activation holds a NaN: every 16-value block holding one
    gets the NaN scale code 0x7F (formats.nvfp4_quantize; np.max keeps the NaN) and dequantizes
    to NaN, every other block bit-exact to formats.py applied to the kernel's own bf16
    activation, under a finite device global scale. The NaNs as in _prologue_nan_rows: every
    block of the x token, one block of every token using the shift row. Outputs prefilled with
    non-NaN bytes."""
    import cupy

    from h3cupy import formats
    from h3cupy.testing import assert_nvfp4_nan_blocks, download

    g = np.float32(2688.0 / 6.0)  # a finite global scale (an amax of 6)
    q = cupy.full((1000, 5376 // 2), 0x11, np.uint8)
    sf = cupy.full((1000, 5376 // 16), 0x22, np.uint8)
    a, x_row = _prologue_nan_rows(
        rng,
        out_format="nvfp4",
        act_global_scale=cupy.asarray(np.array([g], np.float32)),
        q=q,
        scale=sf,
    )
    assert np.isnan(a[x_row].astype(np.float32)).all()
    assert_nvfp4_nan_blocks(download(q), download(sf), a, g)
    assert formats.nvfp4_quantize(a, g)[1][x_row].tolist() == [0x7F] * 336
