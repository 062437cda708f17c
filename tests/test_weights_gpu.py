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
    from h3cupy.testing import download, upload

    w = (rng.standard_normal((5376, 7168)) * 0.02).astype(formats.BF16)
    w.view(np.uint16)[77, 4000] = 0xFFC1  # -NaN
    q, s = weights.quantize_minimax_h3_o_weight_fp8(upload(w))
    got_q, got_s = download(q), download(s)
    want_q, want_s = formats.fp8_quantize_per_channel(w)
    assert np.isnan(want_s[77]) and np.isnan(got_s[77]), got_s[77]
    assert np.all((got_q[77] & 0x7F) == 0x7F), "codes of a NaN row must all be NaN"
    keep = np.setdiff1d(np.arange(5376), [77])
    assert np.array_equal(got_q[keep], want_q[keep])
    assert np.array_equal(got_s[keep].view(np.uint32), want_s[keep].view(np.uint32))

    want_g = formats.nvfp4_global_scale_from_amax(np.max(np.abs(w.astype(np.float32))))
    assert np.isnan(want_g)
    *_, g = weights.quantize_minimax_h3_o_weight_nvfp4(upload(w))
    assert np.isnan(download(g)).all(), download(g)
    g2 = weights.nvfp4_global_scale_from_amax(cupy.asarray(np.array([np.nan], np.float32)))
    assert np.isnan(download(g2)).all()
