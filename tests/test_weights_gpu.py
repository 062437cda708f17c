"""GPU: the device weight helpers (SPEC section 7) bit-exact against their NumPy twins
(SPEC section 8: quantized weights are bit-exact to the host quantizer on the same bf16 values)."""

from __future__ import annotations

import numpy as np
import pytest

from h3cupy.verify import (
    check_weight_helpers,  # at module level: a missing name fails collection on CPU too
)

pytestmark = pytest.mark.gpu


def test_weight_helpers(rng):

    results = check_weight_helpers(rng)
    assert results
    bad = [r.row() for r in results if not r.passed]
    assert not bad, "\n".join(bad)


def test_weight_helpers_nan(rng):
    """A NaN weight element: its row's per-channel FP8 scale and codes are NaN (np.max keeps
    the NaN, formats.py), the other rows bit-exact; the NVFP4 global scale of a tensor holding
    a NaN is NaN, as formats.nvfp4_global_scale_from_amax(np.max(|w|)) gives, and so is that of
    a NaN amax given directly."""
    import cupy

    from h3cupy import formats, weights
    from h3cupy.testing import assert_fp8_nan_rows, download, upload

    w = (rng.standard_normal((5376, 7168)) * 0.02).astype(formats.BF16)
    w.view(np.uint16)[77, 4000] = 0xFFC1  # -NaN
    q, s = weights.quantize_minimax_h3_o_weight_fp8(upload(w))
    # (per-channel FP8 is formats.py's per-token recipe applied to weight rows)
    assert_fp8_nan_rows(download(q), download(s), w, [77])

    want_g = formats.nvfp4_global_scale_from_amax(np.max(np.abs(w.astype(np.float32))))
    assert np.isnan(want_g)
    *_, g = weights.quantize_minimax_h3_o_weight_nvfp4(upload(w))
    assert np.isnan(download(g)).all(), download(g)
    g2 = weights.nvfp4_global_scale_from_amax(cupy.asarray(np.array([np.nan], np.float32)))
    assert np.isnan(download(g2)).all()


def test_fp4_quantize_nan_blocks(rng):
    """NVFP4 of an activation holding NaNs (both signs) under a finite global scale: each block
    holding a NaN gets the NaN scale code 0x7F, as formats.nvfp4_quantize gives (np.max keeps the
    NaN; the fmaxf reading gave the block a finite scale and its NaN a finite code), and
    dequantizes to NaN; every other block is bit-exact."""
    from h3cupy import formats, weights
    from h3cupy.testing import assert_nvfp4_nan_blocks, download, upload

    a = (rng.standard_normal((300, 7168)) * 0.5).astype(formats.BF16)
    g = formats.nvfp4_global_scale_from_amax(np.max(np.abs(a.astype(np.float32))))
    a.view(np.uint16)[3, 17] = 0xFFC1  # -NaN
    a.view(np.uint16)[3, 18] = 0x7FC0  # +NaN, same block
    a.view(np.uint16)[299, 7167] = 0x7FC0  # +NaN, the last block
    q, sf = weights.fp4_quantize(upload(a), float(g), is_sf_swizzled_layout=False)
    assert_nvfp4_nan_blocks(download(q), download(sf), a, g)


@pytest.mark.parametrize(
    "rows, k, swizzled",
    [(257, 5376, True), (33, 656, False), (129, 7168 + 16, False), (1, 16, True)],
)
def test_fp4_quantize_launch_poisoned(rng, rows, k, swizzled):
    """The quantization launch (one warp per 1024 values of a row) into caller buffers poisoned
    with 0xFF, on rows that end inside a task (K = 5376: 5.25 tasks; 656: 0.64; 7184: one group
    pair past 7 tasks; 16: one block): codes and scales bit-exact against formats.nvfp4_quantize
    (SPEC section 8: NVFP4 codes and scales are bit-exact to the host quantizer). The swizzled
    buffer's padding is zeroed first, as the launch's contract says; the linear one is all
    poison, so a scale the launch skips reads 0xFF, which no finite block produces."""
    import cupy

    from h3cupy import formats, weights
    from h3cupy.core import interop
    from h3cupy.testing import download, poison

    a = formats.to_bf16(rng.standard_normal((rows, k)).astype(np.float32) * 0.5)
    g = np.float32(formats.nvfp4_global_scale_from_amax(np.abs(a.astype(np.float32)).max()))
    want_q, want_sf = formats.nvfp4_quantize(a, g)
    q = cupy.empty((rows, k // 2), cupy.uint8)
    if swizzled:
        sf = cupy.zeros(formats.swizzled_sf_nbytes(rows, k // 16), cupy.uint8)
        want_sf = formats.swizzle_sf_128x4(want_sf)
    else:
        sf = cupy.empty((rows, k // 16), cupy.uint8)
        poison(sf)
    poison(q)
    gd = cupy.asarray(np.array([g], np.float32))
    at = interop.as_tensor(cupy.asarray(a), "a")
    t = [interop.as_tensor(x, n) for x, n in ((gd, "g"), (q, "q"), (sf, "sf"))]
    weights._fp4_quantize_launch(at, *t, swizzled)
    np.testing.assert_array_equal(download(q), want_q)
    np.testing.assert_array_equal(download(sf).reshape(-1), want_sf.reshape(-1))
