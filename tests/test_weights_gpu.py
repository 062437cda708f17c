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
