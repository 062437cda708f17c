"""CPU tests of h3cupy.formats against hand tables and independent reimplementations."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from h3cupy import formats as F

# ------------------------------------------------------------------------------------- helpers
# (the `rng` fixture, fresh and seed-printing, comes from tests/conftest.py)


def _f32(*v: float) -> np.ndarray:
    return np.array(v, dtype=np.float32)


def _e4m3_table() -> np.ndarray:
    """All 127 non-negative finite e4m3 values by code (0x00..0x7E), built from the bit layout
    (1 sign, 4 exponent bits with bias 7, 3 mantissa bits; exponent field 0 is subnormal)."""
    codes = np.arange(0x7F)
    exp, man = codes >> 3, codes & 7
    return np.where(exp == 0, man * 2.0**-9, (1 + man / 8.0) * 2.0 ** (exp - 7))


def _e4m3_nearest_even(x: np.ndarray) -> np.ndarray:
    """Independent RNE-with-saturation e4m3 encoder (nearest table entry, ties to the even code)."""
    vals = _e4m3_table()
    x64 = np.asarray(x, np.float32).astype(np.float64)
    a = np.minimum(np.abs(x64), 448.0)
    hi = np.clip(np.searchsorted(vals, a, side="left"), 0, 126)
    lo = np.clip(hi - 1, 0, 126)
    d_lo, d_hi = a - vals[lo], vals[hi] - a
    code = np.where((d_hi < d_lo) | ((d_hi == d_lo) & (hi % 2 == 0)), hi, lo)
    return (code | np.where(np.signbit(x64), 0x80, 0)).astype(np.uint8)


# ----------------------------------------------------------------------------------------- e2m1

# (input, expected code): every tie of RNE-to-even-code, both sides of each decision point,
# saturation and signed zero.
E2M1_TABLE = [
    (0.0, 0x0),
    (0.1, 0x0),
    (0.25, 0x0),  # tie 0 | 0.5 -> 0 (even code 0)
    (0.2501, 0x1),
    (0.5, 0x1),
    (0.7499, 0x1),
    (0.75, 0x2),  # tie 0.5 | 1 -> 1 (code 2)
    (1.0, 0x2),
    (1.25, 0x2),  # tie 1 | 1.5 -> 1 (code 2)
    (1.2501, 0x3),
    (1.5, 0x3),
    (1.7499, 0x3),
    (1.75, 0x4),  # tie 1.5 | 2 -> 2 (code 4)
    (2.0, 0x4),
    (2.5, 0x4),  # tie 2 | 3 -> 2 (code 4)
    (2.5001, 0x5),
    (3.0, 0x5),
    (3.4999, 0x5),
    (3.5, 0x6),  # tie 3 | 4 -> 4 (code 6)
    (4.0, 0x6),
    (5.0, 0x6),  # tie 4 | 6 -> 4 (code 6)
    (5.0001, 0x7),
    (6.0, 0x7),
    (6.5, 0x7),  # saturation
    (1e9, 0x7),
    (np.inf, 0x7),
    (-0.0, 0x8),
    (-0.25, 0x8),
    (-0.75, 0xA),
    (-1.25, 0xA),
    (-1.75, 0xC),
    (-2.5, 0xC),
    (-3.5, 0xE),
    (-5.0, 0xE),
    (-6.0, 0xF),
    (-1e9, 0xF),
    (-np.inf, 0xF),
]


def test_e2m1_hand_table() -> None:
    x = np.array([v for v, _ in E2M1_TABLE], dtype=np.float32)
    want = np.array([c for _, c in E2M1_TABLE], dtype=np.uint8)
    got = F.e2m1_encode(x)
    assert got.dtype == np.uint8
    np.testing.assert_array_equal(got, want)


def test_e2m1_decode_all_codes() -> None:
    codes = np.arange(16, dtype=np.uint8)
    want = _f32(0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6)
    got = F.e2m1_decode(codes)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want))
    np.testing.assert_array_equal(F.e2m1_encode(got), codes)


def test_e2m1_matches_ml_dtypes(rng: np.random.Generator) -> None:
    # Random magnitudes over the whole range plus every midpoint +- 1 fp32 ulp.
    mids = _f32(0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0)
    near = np.concatenate(
        [mids, np.nextafter(mids, np.float32(0)), np.nextafter(mids, np.float32(9))]
    )
    x = np.concatenate(
        [near, -near, rng.uniform(-8, 8, 200_000).astype(np.float32), _f32(7, 1e9, -1e9)]
    )
    ml = x.astype(ml_dtypes.float4_e2m1fn).astype(np.float32)
    ours = F.e2m1_decode(F.e2m1_encode(x))
    np.testing.assert_array_equal(ours, ml)


# ----------------------------------------------------------------------------------------- e4m3

E4M3_TABLE = [
    (0.0, 0x00),
    (-0.0, 0x80),
    (1.0, 0x38),
    (1.0625, 0x38),  # tie 1 | 1.125 -> 1 (even mantissa)
    (1.1875, 0x3A),  # tie 1.125 | 1.25 -> 1.25
    (2.0**-6, 0x08),  # smallest normal
    (2.0**-9, 0x01),  # smallest subnormal
    (2.0**-10, 0x00),  # tie 0 | 2^-9 -> 0
    (2.0**-10 * 1.0001, 0x01),
    (3 * 2.0**-10, 0x02),  # tie 2^-9 | 2^-8 -> 2^-8 (even code 2)
    (5 * 2.0**-10, 0x02),  # tie 2^-8 | 3*2^-9 -> 2^-8
    (7 * 2.0**-9, 0x07),  # largest subnormal
    (416.0, 0x7D),
    (432.0, 0x7E),  # tie 416 | 448 -> 448 (even code 0x7E)
    (448.0, 0x7E),
    (464.0, 0x7E),  # saturation (would be NaN in ml_dtypes without the clip)
    (500.0, 0x7E),
    (1e6, 0x7E),
    (np.inf, 0x7E),
    (-448.0, 0xFE),
    (-464.0, 0xFE),
    (-500.0, 0xFE),
    (-1e6, 0xFE),
    (-np.inf, 0xFE),
    (-(2.0**-9), 0x81),
    (np.nan, 0x7F),
]


def test_e4m3_hand_table() -> None:
    x = np.array([v for v, _ in E4M3_TABLE], dtype=np.float32)
    want = np.array([c for _, c in E4M3_TABLE], dtype=np.uint8)
    np.testing.assert_array_equal(F.e4m3_encode(x), want)


def test_e4m3_table_matches_ml_dtypes_decode() -> None:
    codes = np.arange(0x7F, dtype=np.uint8)
    np.testing.assert_array_equal(F.e4m3_decode(codes).astype(np.float64), _e4m3_table())
    all_codes = np.arange(256, dtype=np.uint8)
    dec = F.e4m3_decode(all_codes)
    finite = np.isfinite(dec)
    assert set(all_codes[~finite].tolist()) == {0x7F, 0xFF}
    np.testing.assert_array_equal(F.e4m3_encode(dec[finite]), all_codes[finite])


def test_e4m3_single_rne_rounding(rng: np.random.Generator) -> None:
    """ml_dtypes' float32 -> e4m3 is one RNE rounding: compare against a nearest-table encoder on
    every midpoint (+- one fp32 ulp) and random values of all magnitudes."""
    vals = _e4m3_table()
    mids = ((vals[1:] + vals[:-1]) / 2).astype(np.float32)
    assert np.array_equal(mids.astype(np.float64), (vals[1:] + vals[:-1]) / 2)  # exact in fp32
    near = np.concatenate(
        [mids, np.nextafter(mids, np.float32(0)), np.nextafter(mids, np.float32(1e9))]
    )
    mag = 2.0 ** rng.uniform(-14, 10, 400_000)
    rand = (mag * rng.choice([-1.0, 1.0], mag.size)).astype(np.float32)
    x = np.concatenate([near, -near, vals.astype(np.float32), rand])
    np.testing.assert_array_equal(F.e4m3_encode(x), _e4m3_nearest_even(x))


def test_e4m3_rounds_float64_input_to_fp32_first() -> None:
    # 1.0625 + 2^-30 rounds to the fp32 tie 1.0625 first, then to 1.0 (what a kernel does).
    assert F.e4m3_encode(np.float64(1.0625 + 2.0**-30)) == 0x38


def test_ue4m3() -> None:
    x = _f32(0.0, -0.0, 2.0**-11, 1e-6, 2.0**-10, 2.0**-10 * 1.01, 3 * 2.0**-10, 1.0, 448, 500, 1e9)
    want = np.array([0, 0, 0, 0, 0, 0x01, 0x02, 0x38, 0x7E, 0x7E, 0x7E], dtype=np.uint8)
    got = F.ue4m3_encode(x)
    np.testing.assert_array_equal(got, want)
    assert not (got & 0x80).any()
    np.testing.assert_array_equal(
        F.ue4m3_decode(want), _f32(0, 0, 0, 0, 0, 2**-9, 2**-8, 1, 448, 448, 448)
    )


# ----------------------------------------------------------------------------------------- bf16


def test_bf16_rne_ties() -> None:
    u = 2.0**-7  # bf16 spacing on [1, 2)
    x = np.array(
        [
            1 + u / 2,  # tie 1 | 1+u -> 1 (even)
            1 + 3 * u / 2,  # tie 1+u | 1+2u -> 1+2u
            1 + u / 2 + 2.0**-20,  # above the tie -> 1+u
            1 + 3 * u / 2 - 2.0**-20,  # below the tie -> 1+u
            -(1 + u / 2),
            -(1 + 3 * u / 2),
            2.0**-130,  # subnormal, exact
        ],
        dtype=np.float32,
    )
    want = _f32(1, 1 + 2 * u, 1 + u, 1 + u, -1, -(1 + 2 * u), 2.0**-130)
    got = F.bf16_round(x)
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, want)
    b = F.to_bf16(x)
    assert b.dtype == F.BF16
    np.testing.assert_array_equal(b.astype(np.float32), want)


def test_bf16_all_midpoints() -> None:
    """Every bf16 midpoint in [0, max) rounds to the even neighbour; +-1 fp32 ulp goes to the
    nearest."""
    lo = np.arange(0, 0x7F7F, dtype=np.uint16)
    v = lo.view(F.BF16).astype(np.float64)
    nxt = (lo + 1).view(F.BF16).astype(np.float64)
    mid = ((v + nxt) / 2).astype(np.float32)
    even = np.where(lo % 2 == 0, lo, lo + 1).astype(np.uint16)
    np.testing.assert_array_equal(F.to_bf16(mid).view(np.uint16), even)
    up = F.to_bf16(np.nextafter(mid, np.float32(np.inf))).view(np.uint16)
    np.testing.assert_array_equal(up, lo + 1)
    down = F.to_bf16(np.nextafter(mid, np.float32(0))).view(np.uint16)
    np.testing.assert_array_equal(down, lo)


def test_bf16_ulp() -> None:
    x = _f32(1.0, 1.99, 2.0, -3.0, 0.75, 448.0, 0.0, 2.0**-126, 2.0**-130)
    want = _f32(2**-7, 2**-7, 2**-6, 2**-6, 2**-8, 2.0, 2.0**-133, 2.0**-133, 2.0**-133)
    np.testing.assert_array_equal(F.bf16_ulp(x), want)
    assert np.isinf(F.bf16_ulp(np.inf))


# ------------------------------------------------------------------------------------- packing


def test_nibble_order(rng: np.random.Generator) -> None:
    np.testing.assert_array_equal(
        F.pack_e2m1(np.array([1, 2, 3, 4, 0xF, 0x8], np.uint8)),
        np.array([0x21, 0x43, 0x8F], np.uint8),
    )
    np.testing.assert_array_equal(
        F.unpack_e2m1(np.array([0x21, 0xF0], np.uint8)), np.array([1, 2, 0, 0xF], np.uint8)
    )
    codes = rng.integers(0, 16, size=(5, 7, 64), dtype=np.uint8)
    packed = F.pack_e2m1(codes)
    assert packed.shape == (5, 7, 32)
    np.testing.assert_array_equal(F.unpack_e2m1(packed), codes)


# ---------------------------------------------------------------------------------------- NVFP4


def test_nvfp4_hand_block() -> None:
    """Hand-computed block with g = 336 (SPEC.md §8 activation scale, amax 8).

    sfv = (8 * fp32(1/6)) * 336 = fp32(448.0000134) = 448 -> sf 0x7E; os = 336 / 448 = 0.75;
    codes = e2m1(v * 0.75).
    """
    v = _f32(8, 4, 1, -2, 0.5, 0.30078125, 5, 3, 6, 7, -8, 0, 0.66796875, 1.5, 2.5, -3.5)
    assert np.array_equal(F.bf16_round(v), v)
    # v*0.75 = 6, 3, .75(tie->1), -1.5, .375, .2256, 3.75, 2.25, 4.5, 5.25, -6, 0, .501, 1.125,
    #          1.875, -2.625
    codes = [7, 5, 2, 0xB, 1, 0, 6, 4, 6, 7, 0xF, 0, 1, 2, 4, 0xD]
    packed, sf = F.nvfp4_quantize(v[None, :], np.float32(336.0))
    np.testing.assert_array_equal(sf, np.array([[0x7E]], np.uint8))
    np.testing.assert_array_equal(F.unpack_e2m1(packed)[0], np.array(codes, np.uint8))
    np.testing.assert_array_equal(
        packed[0], np.array([0x57, 0xB2, 0x01, 0x46, 0x76, 0x0F, 0x21, 0xD4], np.uint8)
    )
    # dequantized value = code * 448 / 336 = code * 4/3 (fp32 math)
    want = (F.e2m1_decode(np.array(codes, np.uint8)) * np.float32(448)) / np.float32(336)
    np.testing.assert_array_equal(F.nvfp4_dequantize(packed, sf, 336.0)[0], want)


def test_nvfp4_unit_scale_and_underflow() -> None:
    # g = 1, bamax = 6: sfv = fp32(6 * fp32(1/6)) = 1.0 -> sf 0x38, os = 1, codes = e2m1(v).
    v1 = _f32(6, -6, 0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5, -0.5, 1, 1.5, 2, 3, 4, -4)
    # A block whose scale rounds to zero: sf 0 -> os 0 -> all codes 0 (not NaN).
    v2 = np.full(16, 2.0**-20, np.float32) * np.arange(1, 17, dtype=np.float32)
    packed, sf = F.nvfp4_quantize(np.concatenate([v1, F.bf16_round(v2)])[None], 1.0)
    np.testing.assert_array_equal(sf, np.array([[0x38, 0x00]], np.uint8))
    codes = F.unpack_e2m1(packed)[0]
    np.testing.assert_array_equal(codes[:16], F.e2m1_encode(v1))
    np.testing.assert_array_equal(codes[16:], np.zeros(16, np.uint8))


def test_nvfp4_random_rows_bounds(rng: np.random.Generator) -> None:
    """Random bf16 rows: scale within one ue4m3 code of bamax*g/6, values within half an e2m1 step
    of the block scale (no saturation beyond the block's amax)."""
    a = F.bf16_round(rng.standard_normal((64, 256)).astype(np.float32) * 0.5)
    g = F.nvfp4_global_scale_from_amax(np.abs(a).max())
    packed, sf = F.nvfp4_quantize(a, g)
    assert packed.shape == (64, 128) and sf.shape == (64, 16)
    blocks = a.reshape(64, 16, 16)
    ideal = blocks.__abs__().max(-1).astype(np.float64) * float(g) / 6
    sfd = F.ue4m3_decode(sf).astype(np.float64)
    assert np.all(np.abs(sfd - ideal) <= 2.0 ** np.floor(np.log2(ideal)) / 8 + 1e-30)
    deq = F.nvfp4_dequantize(packed, sf, g).reshape(64, 16, 16).astype(np.float64)
    step = sfd[..., None] / float(g)  # e2m1 step <= 2 in code units -> half step = 1 * sf/g
    assert np.all(np.abs(deq - blocks) <= step * 1.0 + 1e-6)


def test_nvfp4_global_scale_from_amax() -> None:
    assert F.nvfp4_global_scale_from_amax(8.0) == np.float32(336.0)
    assert F.nvfp4_global_scale_from_amax(np.array([4.0], np.float32)) == np.float32(672.0)
    g0 = F.nvfp4_global_scale_from_amax(0.0)
    assert g0 == np.float32(2688.0) / np.float32(1e-12)
    assert isinstance(g0, np.float32)


# ------------------------------------------------------------------------------------------ FP8


def test_fp8_per_token_true_division(rng: np.random.Generator) -> None:
    """The scale is RN(amax/448) and the codes use a true fp32 division; a multiply by the fp32
    reciprocal of the scale is a different function (it lands on the other side of e4m3 ties)."""
    a = F.bf16_round(rng.standard_normal((256, 5376)).astype(np.float32) * 0.5)
    codes, scale = F.fp8_quantize_per_token(a)
    amax = np.abs(a).max(axis=1).astype(np.float64)
    # fp32 / fp32 rounded via float64 is correctly rounded (53 >= 2*24 + 2).
    np.testing.assert_array_equal(scale, (amax / 448.0).astype(np.float32))
    by_div = _e4m3_nearest_even(a / scale[:, None])
    by_mul = _e4m3_nearest_even(a * (np.float32(1) / scale)[:, None])
    np.testing.assert_array_equal(codes, by_div)
    differ = int(np.count_nonzero(by_div != by_mul))
    print(f"reciprocal-multiply codes differing: {differ} of {a.size}")
    assert differ > 0
    assert not np.array_equal(codes, by_mul)


def test_fp8_per_channel_and_dequantize(rng: np.random.Generator) -> None:
    w = F.bf16_round(rng.standard_normal((96, 200)).astype(np.float32) * 0.01)
    w[5] *= 1000  # one loud row must not change the others' scales
    codes, scale = F.fp8_quantize_per_channel(w)
    amax = np.abs(w).max(axis=1).astype(np.float64)
    np.testing.assert_array_equal(scale, (amax / 448.0).astype(np.float32))
    np.testing.assert_array_equal(codes, _e4m3_nearest_even(w / scale[:, None]))
    assert (codes & 0x7F).max() <= 0x7E
    perm = rng.permutation(96)
    c2, s2 = F.fp8_quantize_per_channel(w[perm])
    np.testing.assert_array_equal(c2, codes[perm])
    np.testing.assert_array_equal(s2, scale[perm])
    deq = F.fp8_dequantize(codes, scale)
    np.testing.assert_array_equal(deq, F.e4m3_decode(codes) * scale[:, None])
    # within half an e4m3 step (relative 2^-4) of the input, or the subnormal half step
    assert np.all(np.abs(deq - w) <= np.abs(w) * 2.0**-4 + scale[:, None] * 2.0**-10)


# ---------------------------------------------------------------------------------- 128x4 swizzle


def test_sf_offset_hand_entries() -> None:
    cases = [
        # (r, c, n_cols, offset)
        (0, 0, 8, 0),
        (0, 1, 8, 1),
        (1, 0, 8, 16),
        (32, 0, 8, 4),
        (0, 4, 8, 512),
        (128, 0, 8, 1024),  # (1 * 2 + 0) * 512
        (127, 3, 8, 511),  # 31*16 + 3*4 + 3
        (200, 5, 6, 1673),  # C' = 8: (1*2 + 1)*512 + 8*16 + 2*4 + 1
    ]
    for r, c, n, off in cases:
        assert int(F.sf_128x4_offset(r, c, n)) == off, (r, c, n)
    assert F.swizzled_sf_nbytes(200, 6) == 256 * 8
    assert F.swizzled_sf_nbytes(21504, 336) == 21504 * 336
    assert F.swizzled_sf_nbytes(5376, 448) == 5376 * 448


@pytest.mark.parametrize("rows,cols", [(128, 4), (200, 6), (256, 336), (5, 3)])
def test_swizzle_round_trip_and_formula(rng: np.random.Generator, rows: int, cols: int) -> None:
    sf = rng.integers(1, 256, size=(rows, cols), dtype=np.uint8)
    flat = F.swizzle_sf_128x4(sf)
    assert flat.shape == (F.swizzled_sf_nbytes(rows, cols),) and flat.dtype == np.uint8
    r, c = np.meshgrid(np.arange(rows), np.arange(cols), indexing="ij")
    off = F.sf_128x4_offset(r, c, cols)
    np.testing.assert_array_equal(flat[off], sf)
    assert np.unique(off).size == off.size  # injective
    pad = np.ones(flat.size, bool)
    pad[off.ravel()] = False
    assert not flat[pad].any()  # padding bytes are zero
    np.testing.assert_array_equal(F.unswizzle_sf_128x4(flat, rows, cols), sf)
    with pytest.raises(ValueError):
        F.unswizzle_sf_128x4(flat[:-1], rows, cols)


# ------------------------------------------------------------------------------------ row orders


def test_fc1_prepack_permutation(rng: np.random.Generator) -> None:
    src = F.fc1_prepack_source_rows(16)
    np.testing.assert_array_equal(
        src, np.r_[0:8, 16:24, 8:16, 24:32]
    )  # 8 gate rows, their 8 up rows
    full = F.fc1_prepack_source_rows()
    assert full.shape == (28672,) and full.dtype == np.int64
    np.testing.assert_array_equal(np.sort(full), np.arange(28672))
    ffn = 14336
    c = rng.integers(0, ffn, 1000)
    for is_up in (0, 1):
        p = 16 * (c // 8) + c % 8 + 8 * is_up
        np.testing.assert_array_equal(full[p], c + ffn * is_up)
    w = rng.standard_normal((64, 5)).astype(np.float32)
    p = F.fc1_prepack_rows(w)
    np.testing.assert_array_equal(p, w[F.fc1_prepack_source_rows(32)])
    np.testing.assert_array_equal(F.fc1_unpack_rows(p), w)
    s = rng.standard_normal(64).astype(np.float32)
    np.testing.assert_array_equal(F.fc1_unpack_rows(F.fc1_prepack_rows(s)), s)


def test_qkv_row_orders(rng: np.random.Generator) -> None:
    heads, dh = 2, 4
    ck = np.arange(3 * heads * dh)
    eng = F.qkv_rows_checkpoint_to_engine(ck, heads, dh)
    for h in range(heads):
        for kind in range(3):
            for d in range(dh):
                assert eng[kind * heads * dh + h * dh + d] == h * 3 * dh + kind * dh + d
    np.testing.assert_array_equal(F.qkv_rows_engine_to_checkpoint(eng, heads, dh), ck)
    w = rng.standard_normal((21504, 3)).astype(np.float32)
    e = F.qkv_rows_checkpoint_to_engine(w)
    np.testing.assert_array_equal(e[7168 + 5 * 128 + 17], w[5 * 384 + 128 + 17])
    np.testing.assert_array_equal(F.qkv_rows_engine_to_checkpoint(e), w)
    with pytest.raises(ValueError):
        F.qkv_rows_checkpoint_to_engine(w[:-1])


def test_assert_fp8_nan_rows_checks_what_it_says(rng):
    """testing.assert_fp8_nan_rows (the GPU tests' NaN-row check) passes the reference's own
    codes and scales for rows holding a NaN, and fails when a NaN row got a finite scale (the
    fmaxf reading), a code that is not NaN, or another row a different code."""
    from h3cupy.testing import assert_fp8_nan_rows

    a = (rng.standard_normal((6, 512)) * 0.5).astype(F.BF16)
    a.view(np.uint16)[2, 7] = 0xFFC1  # -NaN
    q, s = F.fp8_quantize_per_token(a)
    assert_fp8_nan_rows(q.copy(), s.copy(), a, [2])
    finite = s.copy()
    finite[2] = 1.0
    with pytest.raises(AssertionError):
        assert_fp8_nan_rows(q, finite, a, [2])
    not_nan = q.copy()
    not_nan[2, 0] = 0x11
    with pytest.raises(AssertionError):
        assert_fp8_nan_rows(not_nan, s, a, [2])
    other = q.copy()
    other[4, 3] ^= 1
    with pytest.raises(AssertionError):
        assert_fp8_nan_rows(other, s, a, [2])


def test_assert_nvfp4_nan_blocks_checks_what_it_says(rng):
    """testing.assert_nvfp4_nan_blocks (the GPU tests' NaN-block check) passes the reference's own
    output for blocks holding a NaN (their codes changed too: not compared), and fails when a NaN
    block got a finite scale (the fmaxf reading), or another block a different code or scale."""
    from h3cupy.testing import assert_nvfp4_nan_blocks

    a = (rng.standard_normal((4, 256)) * 0.5).astype(F.BF16)
    a.view(np.uint16)[1, 37] = 0xFFC1  # -NaN, block (1, 2)
    a.view(np.uint16)[3, 255] = 0x7FC0  # +NaN, block (3, 15)
    g = F.nvfp4_global_scale_from_amax(2.0)
    q, sf = F.nvfp4_quantize(a, g)
    assert sf[1, 2] == 0x7F and sf[3, 15] == 0x7F
    assert np.isnan(F.nvfp4_dequantize(q, sf, g)[1, 32:48]).all()
    other_codes = q.copy()
    other_codes[1, 16:24] ^= 0x77  # the NaN block's codes: unspecified
    assert_nvfp4_nan_blocks(other_codes, sf.copy(), a, g)
    finite = sf.copy()
    finite[1, 2] = 0x38
    with pytest.raises(AssertionError):
        assert_nvfp4_nan_blocks(q, finite, a, g)
    bad_code = q.copy()
    bad_code[0, 5] ^= 1
    with pytest.raises(AssertionError):
        assert_nvfp4_nan_blocks(bad_code, sf, a, g)
    bad_sf = sf.copy()
    bad_sf[2, 4] ^= 1
    with pytest.raises(AssertionError):
        assert_nvfp4_nan_blocks(q, bad_sf, a, g)
