"""GPU: the device's scalar codecs (h3/numeric.cuh, through h3cupy.ops.codec.codec_probe) against
formats.py, element by element, on the values random data rarely reaches: NaN of either sign,
infinities, -0, the e4m3 saturation edge (448, the 464 tie, 480), the e2m1 decision points and
their neighbours, the bf16 ties, e4m3 subnormals and the ue4m3 underflow tie, fp32 subnormals;
then fresh random values at several scales. Exact comparisons (SPEC section 8: the codecs are
bit-exact), with two documented exceptions: a NaN's bf16 bits and e4m3 sign (any NaN encoding
is a NaN), and e2m1 of a NaN (no NaN code exists; formats.py's comparisons give 0 / 8, the
device's arithmetic 7 / 15; the NVFP4 block of a NaN carries the NaN in its scale instead)."""

from __future__ import annotations

import numpy as np
import pytest

from h3cupy import formats

pytestmark = pytest.mark.gpu


def _specials() -> np.ndarray:
    f = np.float32
    e2m1_points = [0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 6.0]
    v = [0.0, -0.0, np.inf, -np.inf, 448.0, 464.0, 479.99, 480.0, 1e30, 3.4e38, 1e-45, 2.0**-126]
    v += [2.0**-9, 2.0**-10, 1.5 * 2.0**-10, 2.0**-11, 2.0**-6, 0.5 * 2.0**-6]
    v += [1.0 + 2.0**-8, 1.0 + 3 * 2.0**-8, 1.0 + 2.0**-8 + 2.0**-20, 65504.0]
    for p in e2m1_points + [1.0, 2.0, 4.0, 7.0]:
        v += [p, np.nextafter(f(p), f(0)), np.nextafter(f(p), f(np.inf))]
    v = np.array(v, np.float32)
    v = np.concatenate([v, -v])
    nan = np.array([0x7FC00000, 0xFFC00000, 0x7F800001, 0xFFFFFFFF], np.uint32).view(np.float32)
    return np.concatenate([v, nan])


def _inputs(rng) -> np.ndarray:
    randoms = [rng.standard_normal(4096).astype(np.float32) * s for s in (1e-3, 0.5, 3.0, 300.0)]
    return np.concatenate([_specials(), *randoms])


def test_codecs_match_formats(rng):
    import cupy

    from h3cupy.ops.codec import codec_probe
    from h3cupy.testing import download

    x = _inputs(rng)
    got = codec_probe(cupy.asarray(x))
    nan = np.isnan(x)

    bf16 = download(got.bf16_bits)
    want_bf16 = formats.to_bf16(x).view(np.uint16)
    assert np.array_equal(bf16[~nan], want_bf16[~nan]), x[~nan][bf16[~nan] != want_bf16[~nan]]
    assert np.isnan(bf16[nan].view(formats.BF16).astype(np.float32)).all()

    e4m3 = download(got.e4m3_code)
    want_e4m3 = formats.e4m3_encode(x)
    assert np.array_equal(e4m3[~nan], want_e4m3[~nan]), x[~nan][e4m3[~nan] != want_e4m3[~nan]]
    assert np.all((e4m3[nan] & 0x7F) == 0x7F), e4m3[nan]  # 0x7f / 0xff: both NaN

    ue4m3 = download(got.ue4m3_code)
    assert np.array_equal(ue4m3, formats.ue4m3_encode(x)), x[ue4m3 != formats.ue4m3_encode(x)]

    e2m1 = download(got.e2m1_code)
    want_e2m1 = formats.e2m1_encode(x)
    assert np.array_equal(e2m1[~nan], want_e2m1[~nan]), x[~nan][e2m1[~nan] != want_e2m1[~nan]]


def test_decoders_match_formats():
    import cupy

    from h3cupy.ops.codec import codec_probe
    from h3cupy.testing import download

    got = codec_probe(cupy.asarray(np.ones(1, np.float32)))
    codes = np.arange(256, dtype=np.uint8)

    value = download(got.e4m3_value)
    want = formats.e4m3_decode(codes)
    nan = np.isnan(want)
    assert np.array_equal(nan, np.isnan(value)), codes[nan != np.isnan(value)]
    assert np.array_equal(value[~nan].view(np.uint32), want[~nan].view(np.uint32))

    pair = download(got.e2m1_pair)
    lo = (pair & 0xFFFF).astype(np.uint16).view(formats.BF16).astype(np.float32)
    hi = (pair >> 16).astype(np.uint16).view(formats.BF16).astype(np.float32)
    assert np.array_equal(lo, formats.e2m1_decode(codes & 0x0F))
    assert np.array_equal(hi, formats.e2m1_decode(codes >> 4))
    # -0 for the sign code 8 (e2m1 -0), as formats.py decodes it
    assert np.array_equal(np.signbit(lo), np.signbit(formats.e2m1_decode(codes & 0x0F)))

    # The word-wide decoder (e2m1x8_scaled_bf16x8): every code at every position of the word
    # times every e4m3 scale byte. The product is exact in bf16 (a 2-bit by 4-bit significand),
    # so the bits must equal formats.py's values multiplied in fp32 and rounded once to bf16:
    # no tolerance. NaN scales (0x7f, 0xff) must give NaN in every value.
    scaled = download(got.e2m1_scaled)
    e2m1 = formats.e2m1_decode(np.arange(16, dtype=np.uint8))
    scale = formats.e4m3_decode(codes)
    want = (scale[:, None] * e2m1[None, :]).astype(formats.BF16)
    want = np.broadcast_to(want[:, :, None], (256, 16, 8))
    got_v = scaled.view(formats.BF16).astype(np.float32)
    nan = np.isnan(want.astype(np.float32))
    assert nan.sum() == 2 * 16 * 8
    assert np.array_equal(np.isnan(got_v), nan)
    assert np.array_equal(scaled[~nan], want.view(np.uint16)[~nan])


def test_codec_probe_refuses_bad_input():
    import cupy

    from h3cupy.ops.codec import codec_probe

    with pytest.raises(ValueError, match="x: expected a contiguous 1-D float32"):
        codec_probe(cupy.ones((2, 2), cupy.float32))
    with pytest.raises(ValueError, match="x: expected"):
        codec_probe(cupy.ones(4, cupy.float64))
