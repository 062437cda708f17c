"""CPU tests of the NumPy references (h3cupy.reference): hand-checkable cases, invariants and
independent float64 recomputations at the SPEC.md rounding points.

Most tests use narrow hidden sizes (the references are shape-generic) so the file runs in well
under a minute; one fixture runs the three pre-attention references at the production shapes.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

import h3cupy.reference as R
from h3cupy import formats as F
from h3cupy.reference import _common
from h3cupy.reference import inputs as I
from h3cupy.reference.pre_attention import _rope

HEADS, DH = 56, 128
# The `rng` fixture (fresh generator, seed printed for replay) comes from tests/conftest.py.


# --------------------------------------------------------------------------------- helpers


def f32(a: np.ndarray) -> np.ndarray:
    return np.asarray(a).astype(np.float32)


def within_spec(got: np.ndarray, ref: np.ndarray, mag: np.ndarray | None = None) -> np.ndarray:
    """SPEC.md §8 element bound ``|got - ref| <= 1e-2 + 1e-2*mag + 2*ulp_bf16(mag)``."""
    got, ref = f32(got).astype(np.float64), f32(ref).astype(np.float64)
    mag = np.abs(ref) if mag is None else np.asarray(mag, np.float64)
    return np.abs(got - ref) <= 1e-2 + 1e-2 * mag + 2 * F.bf16_ulp(mag).astype(np.float64)


def bf16_ulp_distance(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Distance in bf16 steps between two arrays of bf16 values (ordered bit patterns)."""

    def ordered(x: np.ndarray) -> np.ndarray:
        bits = F.to_bf16(x).view(np.uint16).astype(np.int64)
        return np.where(bits & 0x8000, 0x8000 - bits, bits)

    return np.abs(ordered(a) - ordered(b))


def is_zero(arr: np.ndarray) -> np.ndarray:
    """Zero test of an output element: +-0.0 for floats; +0 and -0 codes are interchangeable
    (SPEC.md §1): e4m3 bytes 0x00 / 0x80, e2m1 nibbles 0x0 / 0x8 in packed NVFP4 bytes."""
    arr = np.asarray(arr)
    if arr.dtype != np.uint8:
        return arr == 0
    mask = 0x77 if arr.shape[-1] == 64 else 0x7F  # packed NVFP4 [.., 64] vs e4m3 / scales
    return (arr & mask) == 0


def prologue_args(d: dict) -> tuple:
    return d["x"], d["x_norm_weight"], d["adaln_scale"], d["adaln_shift"], d["adaln_index"]


def prologue_f64(d: dict, eps: float = 1e-5) -> np.ndarray:
    """Independent prologue: float64 math, one bf16 rounding per SPEC.md §2 line."""
    x = f32(d["x"]).astype(np.float64)
    rstd = 1.0 / np.sqrt(np.mean(x * x, axis=1) + eps)
    n = F.bf16_round(x * rstd[:, None] * f32(d["x_norm_weight"]))
    idx = np.asarray(d["adaln_index"]).astype(np.int64)
    rows = d["adaln_scale"].shape[0]
    out = np.zeros(x.shape, np.float32)
    for m in range(x.shape[0]):
        i = idx[m]
        if 0 <= i < rows:
            s1 = F.bf16_round(f32(d["adaln_scale"][i]).astype(np.float64) + 1.0)
            out[m] = F.bf16_round(
                n[m].astype(np.float64) * s1 + f32(d["adaln_shift"][i]).astype(np.float64)
            )
    return out


def rms_rope_f64(y: np.ndarray, g: np.ndarray, cs: np.ndarray, eps: float) -> np.ndarray:
    """Independent per-head RMSNorm + RoPE (float64, bf16 roundings of SPEC.md §3 steps 3-4).

    y: [M, H, 128] bf16 values; cs: [M, 96]."""
    y = y.astype(np.float64)
    rstd = 1.0 / np.sqrt(np.mean(y * y, axis=-1, keepdims=True) + eps)
    n = F.bf16_round(y * rstd * f32(g)).astype(np.float64)
    c, s = cs[:, None, :48].astype(np.float64), cs[:, None, 48:].astype(np.float64)
    out = n.copy()
    out[..., :48] = n[..., :48] * c - n[..., 48:96] * s
    out[..., 48:96] = n[..., 48:96] * c + n[..., :48] * s
    return F.bf16_round(out)


def rope_mag(ref: np.ndarray) -> np.ndarray:
    """SPEC.md §8 magnitude on the RoPE dims: max(|ref|, |partner|) for d in [0, 96)."""
    mag = np.abs(f32(ref))
    partner = np.concatenate([mag[..., 48:96], mag[..., :48]], axis=-1)
    mag[..., :96] = np.maximum(mag[..., :96], partner)
    return mag


def small_pre_attention(m: int, k: int, rng: np.random.Generator) -> dict:
    """Pre-attention inputs with 56 heads x 128 but a narrow hidden size k."""
    return I.pre_attention_inputs(m, rows=9, k=k, rng=rng)


def pre_attention_bf16(d: dict, p: int = 1, **kw) -> np.ndarray:
    return R.minimax_h3_bf16_pre_attention(
        *prologue_args(d),
        d["qkv_weight"],
        d["q_norm_weight"],
        d["k_norm_weight"],
        d["rope_cos_sin"],
        ulysses_degree=p,
        **kw,
    )


def natural_qkv(out_p1: np.ndarray) -> np.ndarray:
    """P = 1 output [1, M, 56, 3, 128] -> q, k, v each [M, 56, 128]."""
    t = out_p1[0]
    return t[:, :, 0], t[:, :, 1], t[:, :, 2]


# ---------------------------------------------------------------------------- exact fp32 sums


def _oracle_round_f32(exact: Fraction) -> np.float32:
    """Correct RNE of a rational to fp32 by comparing the neighbours of a candidate."""
    c = np.float32(float(exact))
    cands = [np.nextafter(c, np.float32(-np.inf)), c, np.nextafter(c, np.float32(np.inf))]
    best = min(
        cands,
        key=lambda v: (abs(Fraction(float(v)) - exact), int(np.array(v).view(np.uint32)) & 1),
    )
    return np.float32(best)


def test_round_sum_f32_is_one_rounding(rng: np.random.Generator) -> None:
    # Crafted: 1 + 2^-24 is an fp32 midpoint; a tiny addend decides the direction although the
    # float64 sum has already lost it.
    p = np.array([1 + 2.0**-24, 1 + 2.0**-24, 1 + 3 * 2.0**-24, -(1 + 2.0**-24)])
    q = np.array([2.0**-80, -(2.0**-80), 0.0, 2.0**-90])
    want = np.array([1 + 2.0**-23, 1.0, 1 + 2 * 2.0**-23, -1.0], np.float32)
    np.testing.assert_array_equal(_common.round_sum_f32(p, q), want)
    # Random exact products of fp32 values, mixed exponents.
    a = (rng.standard_normal(600) * 2.0 ** rng.integers(-30, 30, 600)).astype(np.float32)
    b = rng.standard_normal(600).astype(np.float32)
    c = (rng.standard_normal(600) * 2.0 ** rng.integers(-60, 10, 600)).astype(np.float32)
    prod = a.astype(np.float64) * b.astype(np.float64)
    got = _common.round_sum_f32(prod, c.astype(np.float64))
    for i in range(600):
        exact = Fraction(float(a[i])) * Fraction(float(b[i])) + Fraction(float(c[i]))
        assert got[i] == _oracle_round_f32(exact), i


# ---------------------------------------------------------------------------------- prologue


def test_prologue_hand_case() -> None:
    """K = 16, x = +-2, eps = 0: rstd = 0.5 exactly, so n = +-w; a = bf16(n*s1 + shift)."""
    k = 16
    x = np.tile(np.array([2.0, -2.0], np.float32), 8)[None].repeat(4, 0)
    w = np.ones(k, np.float32)
    w[1::2] = 1 + 2.0**-7
    w[0] = 1 + 2.0**-7
    scale = np.stack([np.full(k, 0.5), np.full(k, -0.5)]).astype(np.float32)
    shift = np.stack([np.full(k, 0.25), np.full(k, -0.25)]).astype(np.float32)
    idx = np.array([0, 1, -1, 2], np.int64)
    a = R.prologue(x, w, scale, shift, idx, eps=0.0)
    # row 0: s1 = 1.5, shift 0.25.  x=+2 -> n=w; x=-2 -> n=-w.
    #   w=1+2^-7, +: 1.76171875 is a bf16 tie -> 1.765625;  -: -1.26171875 tie -> -1.265625
    #   w=1, +: 1.75; -: -1.25
    want0 = np.where(x[0] > 0, 1.75, -1.25).astype(np.float32)
    want0[0] = 1.765625
    want0[1::2] = -1.265625
    np.testing.assert_array_equal(a[0], want0)
    # row 1: s1 = 0.5, shift -0.25: +w*0.5 - 0.25 / -w*0.5 - 0.25 (exact in bf16)
    n1 = np.where(x[1] > 0, w, -w).astype(np.float64)
    np.testing.assert_array_equal(a[1], (n1 * 0.5 - 0.25).astype(np.float32))
    np.testing.assert_array_equal(a[2:], 0.0)


@pytest.mark.parametrize("m,k", [(8, 5376), (300, 256)])
def test_prologue_vs_float64(rng: np.random.Generator, m: int, k: int) -> None:
    """Within one bf16 step of a float64 recomputation with one rounding per line, identical on
    >= 99.9% of elements (the fp32 rounding of x*rstd*w may move a bf16 tie); invalid rows 0."""
    d = I.prologue_inputs(m, rows=9, k=k, rng=rng)
    a = R.prologue(*prologue_args(d))
    ref = prologue_f64(d)
    dist = bf16_ulp_distance(a, ref)
    # One bf16 step of n moves a by ulp(n)*|s1| before a's own rounding; where n*s1 nearly
    # cancels shift that is many ulps of a, so the bound is stated per rounding point (the same
    # bound the GPU tests use).
    idx = d["adaln_index"]
    n = _common.rms_normalize(f32(d["x"]), d["x_norm_weight"], 1e-5)
    s1 = F.bf16_round(f32(d["adaln_scale"]) + np.float32(1.0))[np.clip(idx, 0, 8)]
    bound = F.bf16_ulp(n) * np.abs(s1) + F.bf16_ulp(np.maximum(np.abs(a), np.abs(ref)))
    assert np.all(np.abs(a.astype(np.float64) - ref) <= bound)
    assert np.count_nonzero(dist == 0) >= 0.999 * dist.size
    invalid = (idx < 0) | (idx >= 9)
    assert invalid.any() == (m >= 129)
    assert not a[invalid].any()
    assert np.all(np.abs(a[~invalid]).max(axis=1) > 0)


def test_prologue_strided_tables_equal_dense(rng: np.random.Generator) -> None:
    d = I.prologue_inputs(40, rows=5, k=96, index_dtype=np.int32, rng=rng)
    assert d["adaln_scale"].strides == (6 * 96 * 2, 2)
    assert not d["adaln_scale"].flags.c_contiguous
    dense = dict(d)
    dense["adaln_scale"] = np.ascontiguousarray(d["adaln_scale"])
    dense["adaln_shift"] = np.ascontiguousarray(d["adaln_shift"])
    np.testing.assert_array_equal(R.prologue(*prologue_args(d)), R.prologue(*prologue_args(dense)))
    # float32 copies of the bf16 inputs give the same result
    as32 = {k: f32(v) if k != "adaln_index" else v for k, v in d.items()}
    np.testing.assert_array_equal(R.prologue(*prologue_args(d)), R.prologue(*prologue_args(as32)))


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_prologue_invalid_indices_give_zero_rows(rng: np.random.Generator, dtype: type) -> None:
    rows = 4
    d = I.prologue_inputs(8, rows=rows, k=64, rng=rng)
    info = np.iinfo(dtype)
    bad = [-1, rows, info.min, info.max] + ([2**40] if dtype == np.int64 else [rows + 1])
    idx = np.array([0, bad[0], 1, bad[1], bad[2], 3, bad[3], bad[4]], dtype=dtype)
    x = f32(d["x"])
    x[1, 3] = np.nan
    x[3, 0] = np.inf
    a = R.prologue(x, d["x_norm_weight"], d["adaln_scale"], d["adaln_shift"], idx)
    invalid = np.array([0, 1, 0, 1, 1, 0, 1, 1], bool)
    assert np.all(a[invalid] == 0)
    assert np.all(np.isfinite(a)) and np.all(np.abs(a[~invalid]).max(axis=1) > 0)


def test_prologue_quantized_forms(rng: np.random.Generator) -> None:
    d = I.prologue_inputs(150, rows=9, k=128, rng=rng)
    a = R.prologue(*prologue_args(d))
    a8, codes, scale = R.prologue_fp8(*prologue_args(d))
    np.testing.assert_array_equal(a8, a)
    c_ref, s_ref = F.fp8_quantize_per_token(a)
    np.testing.assert_array_equal(codes, c_ref)
    np.testing.assert_array_equal(scale, s_ref)
    a4, packed, sf = R.prologue_nvfp4(*prologue_args(d), act_global_scale=np.array([336.0]))
    np.testing.assert_array_equal(a4, a)
    p_ref, sf_ref = F.nvfp4_quantize(a, 336.0)
    np.testing.assert_array_equal(packed, p_ref)
    np.testing.assert_array_equal(sf, sf_ref)
    invalid = (d["adaln_index"] < 0) | (d["adaln_index"] >= 9)
    assert not codes[invalid].any() and not packed[invalid].any() and not sf[invalid].any()
    np.testing.assert_array_equal(scale[invalid], np.float32(1e-12) / np.float32(448))


# ----------------------------------------------------------------------------- pre-attention


@pytest.mark.parametrize("p", [1, 2, 4, 8])
def test_ulysses_pack_is_the_spec_permutation(rng: np.random.Generator, p: int) -> None:
    d = small_pre_attention(3, 64, rng)
    nat = pre_attention_bf16(d, 1)
    out = pre_attention_bf16(d, p)
    hp = HEADS // p
    assert out.shape == (p, 3, hp, 3, DH)
    for m in range(3):
        for h in range(HEADS):
            for kind in range(3):
                np.testing.assert_array_equal(out[h // hp, m, h % hp, kind], nat[0, m, h, kind])


def test_bf16_pre_attention_vs_float64(rng: np.random.Generator) -> None:
    """Independent float64 pipeline (rounding points of SPEC.md §3), clamped rope_positions,
    qk_eps distinct from eps; SPEC.md §8 bound with the RoPE partner magnitude."""
    m, k = 6, 96
    d = small_pre_attention(m, k, rng)
    s = 40
    cs = I.rope_cache(s)
    pos = np.array([0, 39, -5, 57, 12, 1000], np.int64)
    out = R.minimax_h3_bf16_pre_attention(
        *prologue_args(d),
        d["qkv_weight"],
        d["q_norm_weight"],
        d["k_norm_weight"],
        cs,
        ulysses_degree=1,
        qk_eps=1e-6,
        rope_positions=pos,
    )
    a = prologue_f64(d)
    y = F.bf16_round(a.astype(np.float64) @ f32(d["qkv_weight"]).astype(np.float64).T)
    y = y.reshape(m, 3, HEADS, DH)
    rows = f32(cs)[np.clip(pos, 0, s - 1)]
    q = rms_rope_f64(y[:, 0], d["q_norm_weight"], rows, 1e-6)
    kk = rms_rope_f64(y[:, 1], d["k_norm_weight"], rows, 1e-6)
    for got, ref in zip(natural_qkv(out), (q, kk, y[:, 2]), strict=True):
        assert np.all(within_spec(got, ref, rope_mag(ref)))
        assert np.count_nonzero(bf16_ulp_distance(got, ref) == 0) >= 0.99 * ref.size
    # V of the P = 1 pack is bf16 of the natural [M, 21504] GEMM output's V columns (engine order)
    y_ref = F.bf16_round(
        R.prologue(*prologue_args(d)).astype(np.float64) @ f32(d["qkv_weight"]).astype(np.float64).T
    )
    np.testing.assert_array_equal(out[0, :, :, 2], y_ref[:, 2 * 7168 :].reshape(m, HEADS, DH))


def test_rope_hand_and_pair_norms(rng: np.random.Generator) -> None:
    # Hand case: c = 0.5, s = 0.75 everywhere: out_d = bf16(0.5 n_d - 0.75 n_{d+48}).
    n = np.zeros((1, 1, DH), np.float32)
    n[..., :48] = 1.0
    n[..., 48:96] = 0.5
    n[..., 96:] = 3.0
    cs = np.concatenate([np.full((1, 48), 0.5), np.full((1, 48), 0.75)], 1).astype(np.float32)
    out = _rope(n, cs)
    np.testing.assert_array_equal(out[..., :48], 0.5 - 0.375)
    np.testing.assert_array_equal(out[..., 48:96], 0.25 + 0.75)
    np.testing.assert_array_equal(out[..., 96:], 3.0)
    # Pair norms: rotate normalized heads by the real cache; position 0 is the identity.
    m = 64
    y = F.bf16_round(rng.standard_normal((m, 3 * HEADS * DH)).astype(np.float32))
    qn = R.qkv_epilogue(y, np.ones(DH), np.ones(DH), f32(I.rope_cache(1))[[0] * m], 1e-5)[0]
    cache = f32(I.rope_cache(8192))
    rows = cache[rng.integers(0, 8192, m)]
    qr = R.qkv_epilogue(y, np.ones(DH), np.ones(DH), rows, 1e-5)[0]
    np.testing.assert_array_equal(qr[..., 96:], qn[..., 96:])
    before = np.hypot(qn[..., :48], qn[..., 48:96]).astype(np.float64)
    after = np.hypot(qr[..., :48], qr[..., 48:96]).astype(np.float64)
    # bf16 cos/sin (|c^2 + s^2 - 1| <= 2^-7) and two bf16 roundings
    assert np.all(np.abs(after - before) <= 2.0**-6 * before + 1e-6)


def test_fp8_pre_attention_modes(rng: np.random.Generator) -> None:
    m, k = 150, 64
    d = small_pre_attention(m, k, rng)
    wq, ws = R.quantize_minimax_h3_qkv_weight_fp8(d["qkv_weight"])
    args = (
        *prologue_args(d),
        wq,
        ws,
        d["q_norm_weight"],
        d["k_norm_weight"],
        d["rope_cos_sin"],
    )
    res = R.minimax_h3_fp8_pre_attention(*args)
    assert res.q.shape == (m, HEADS, DH) and res.q_sf is None
    # Same as the BF16 reference fed with the dequantized operands (SPEC.md §8 bound).
    _, act_q, act_s = R.prologue_fp8(*prologue_args(d))
    deq = dict(d, qkv_weight=F.fp8_dequantize(wq, ws))
    ref = natural_qkv(pre_attention_bf16(deq, 1, a=F.fp8_dequantize(act_q, act_s)))
    for got, r in zip(res[:3], ref, strict=True):
        assert np.all(within_spec(got, r, rope_mag(r)))
    # Own workspace override gives the same result.
    again = R.minimax_h3_fp8_pre_attention(*args, act_q=act_q, act_scale=act_s)
    for x, y in zip(res[:3], again[:3], strict=True):
        np.testing.assert_array_equal(x, y)
    # e4m3 mode: codes = e4m3(v * fp32(1/descale)) of the bf16 values.
    ds = (8 / 448, np.array([4 / 448], np.float32), 2 / 448)
    e = R.minimax_h3_fp8_pre_attention(
        *args, out_mode="e4m3", q_descale=ds[0], k_descale=ds[1], v_descale=ds[2]
    )
    for codes, v, dsc in zip(e[:3], res[:3], ds, strict=True):
        os = np.float32(1) / np.float32(np.asarray(dsc).reshape(-1)[0])
        np.testing.assert_array_equal(codes, F.e4m3_encode(v * os))
    assert e.q_sf is None
    # nvfp4 mode: per 16 channels of a head.
    gs = (336.0, 200.0, np.array([500.0], np.float32))
    n = R.minimax_h3_fp8_pre_attention(
        *args, out_mode="nvfp4", q_global_scale=gs[0], k_global_scale=gs[1], v_global_scale=gs[2]
    )
    for pk, sf, v, g in zip(n[:3], n[3:], res[:3], gs, strict=True):
        assert pk.shape == (m, HEADS, 64) and sf.shape == (m, HEADS, 8)
        p_ref, sf_ref = F.nvfp4_quantize(v, g)
        np.testing.assert_array_equal(pk, p_ref)
        np.testing.assert_array_equal(sf, sf_ref)
    # Invalid AdaLN index -> the whole output row is 0 in every mode.
    invalid = (d["adaln_index"] < 0) | (d["adaln_index"] >= 9)
    for arr in (*res[:3], *e[:3], *n):
        assert is_zero(arr[invalid]).all()
    with pytest.raises(ValueError):
        R.minimax_h3_fp8_pre_attention(*args, out_mode="e4m3")
    with pytest.raises(ValueError):
        R.minimax_h3_fp8_pre_attention(*args, out_mode="int8")


def test_nvfp4_pre_attention(rng: np.random.Generator) -> None:
    m, k = 140, 64
    d = small_pre_attention(m, k, rng)
    wq, wsf, wg = R.quantize_minimax_h3_qkv_weight_nvfp4(d["qkv_weight"])
    g_act = F.nvfp4_global_scale_from_amax(8.0)
    args = (
        *prologue_args(d),
        wq,
        wsf,
        wg,
        np.array([g_act]),
        d["q_norm_weight"],
        d["k_norm_weight"],
        d["rope_cos_sin"],
    )
    res = R.minimax_h3_nvfp4_pre_attention(*args)
    # Same as the BF16 reference on the dequantized operands.
    _, act_q, act_sf = R.prologue_nvfp4(*prologue_args(d), act_global_scale=g_act)
    w_lin = F.unswizzle_sf_128x4(wsf, 3 * HEADS * DH, k // 16)
    deq = dict(d, qkv_weight=F.nvfp4_dequantize(wq, w_lin, wg))
    ref = natural_qkv(pre_attention_bf16(deq, 1, a=F.nvfp4_dequantize(act_q, act_sf, g_act)))
    for got, r in zip(res[:3], ref, strict=True):
        assert np.all(within_spec(got, r, rope_mag(r)))
    alpha = np.float32(1) / (np.float32(g_act) * np.float32(wg))
    again = R.minimax_h3_nvfp4_pre_attention(*args, alpha=alpha, act_q=act_q, act_sf=act_sf)
    for x, y in zip(res[:3], again[:3], strict=True):
        np.testing.assert_array_equal(x, y)
    nv = R.minimax_h3_nvfp4_pre_attention(
        *args, out_mode="nvfp4", q_global_scale=336.0, k_global_scale=336.0, v_global_scale=99.0
    )
    np.testing.assert_array_equal(nv.v_sf, F.nvfp4_quantize(res.v, 99.0)[1])
    invalid = (d["adaln_index"] < 0) | (d["adaln_index"] >= 9)
    assert invalid.any()
    for arr in (*res[:3], *nv):
        assert is_zero(arr[invalid]).all()


@pytest.fixture(scope="module")
def production_pre_attention() -> dict:
    """Production-shape inputs (M = 2, K = 5376, 56 x 128) and quantized weights, built once."""
    d = I.pre_attention_inputs(2)
    d["w_fp8"] = R.quantize_minimax_h3_qkv_weight_fp8(d["qkv_weight"])
    d["w_nvfp4"] = R.quantize_minimax_h3_qkv_weight_nvfp4(d["qkv_weight"])
    return d


def test_production_shapes_pre_attention(production_pre_attention: dict) -> None:
    d = production_pre_attention
    assert d["qkv_weight"].shape == (21504, 5376) and d["rope_cos_sin"].shape == (2, 96)
    out = pre_attention_bf16(d, 8)
    assert out.shape == (8, 2, 7, 3, DH) and np.all(np.isfinite(out))
    q, k, v = natural_qkv(pre_attention_bf16(d, 1))
    wq, ws = d["w_fp8"]
    assert wq.shape == (21504, 5376) and ws.shape == (21504,)
    tail = (d["q_norm_weight"], d["k_norm_weight"], d["rope_cos_sin"])
    r8 = R.minimax_h3_fp8_pre_attention(*prologue_args(d), wq, ws, *tail)
    pk, sf, g = d["w_nvfp4"]
    assert pk.shape == (21504, 2688) and sf.shape == (21504 * 336,)
    assert g == np.float32(2688.0) / np.abs(f32(d["qkv_weight"])).max()
    r4 = R.minimax_h3_nvfp4_pre_attention(*prologue_args(d), pk, sf, g, 336.0, *tail)
    # The quantized pipelines track the BF16 one up to their quantization noise.
    for res, tol in ((r8, 0.08), (r4, 0.25)):
        for got, ref in zip(res[:3], (q, k, v), strict=True):
            err = np.sqrt(np.mean((got - ref) ** 2) / np.mean(ref**2))
            assert err < tol, err


# ---------------------------------------------------------------------------------- out_proj


def test_gated_residual_rounding_points() -> None:
    """out = bf16(residual + bf16(gate*o)): two roundings, not one."""
    u = 2.0**-7
    o = np.array([[3.0, 1 + u]], np.float32)
    gate = np.array([[0.5, 1 + u]], np.float32)
    res = np.array([[1.0, 2.0**-8]], np.float32)
    out = _common.gated_residual(o, gate, np.array([0]), res)
    # col 0: 1 + 1.5 = 2.5.  col 1: p = bf16(1 + 2^-6 + 2^-14) = 1 + 2^-6; 1 + 2^-6 + 2^-8 is a
    # bf16 tie -> 1 + 2^-6 (a single rounding of the exact sum would give 1 + 3*2^-7).
    np.testing.assert_array_equal(out, np.array([[2.5, 1 + 2 * u]], np.float32))


def _out_proj_data(m: int, rng: np.random.Generator, n: int = 64, k: int = 128) -> dict:
    d = I.out_proj_inputs(m, rows=9, n=n, k=k, rng=rng)
    # invalid rows carry non-finite attention output: the select must hide it
    invalid = (d["gate_index"] < 0) | (d["gate_index"] >= 9)
    a = f32(d["attn_out"])
    a[np.flatnonzero(invalid)[:1], 0] = np.nan
    a[np.flatnonzero(invalid)[1:2], 1] = np.inf
    d["attn_out"] = a
    d["invalid"] = invalid
    return d


def test_fp8_out_proj(rng: np.random.Generator) -> None:
    d = _out_proj_data(210, rng)
    inv = d["invalid"]
    assert inv.sum() >= 2
    wq, ws = R.quantize_minimax_h3_o_weight_fp8(d["o_weight"])
    out = R.minimax_h3_fp8_out_proj(
        d["attn_out"], wq, ws, d["gate"], d["gate_index"], d["residual"]
    )
    np.testing.assert_array_equal(out[inv], f32(d["residual"])[inv])
    # Independent: dequantized GEMM in float64 with the scales applied as fp32 products.
    aq, asc = F.fp8_quantize_per_token(d["attn_out"])
    acc = F.e4m3_decode(aq).astype(np.float64) @ F.e4m3_decode(wq).astype(np.float64).T
    o = F.bf16_round((acc.astype(np.float32) * asc[:, None]) * ws[None, :])
    g = f32(d["gate"])[np.clip(d["gate_index"], 0, 8)]
    p = F.bf16_round(g * o)
    ref = F.bf16_round(f32(d["residual"]) + p)
    ok = ~inv
    assert bf16_ulp_distance(out[ok], ref[ok]).max() <= 1
    mag = np.maximum(np.abs(ref), np.abs(p))
    assert np.all(within_spec(out[ok], ref[ok], mag[ok]))
    # kernel-workspace override; garbage in the invalid rows' workspace cannot leak either
    aq2 = aq.copy()
    aq2[inv] = 0x7F
    again = R.minimax_h3_fp8_out_proj(
        d["attn_out"], wq, ws, d["gate"], d["gate_index"], d["residual"], act_q=aq2, act_scale=asc
    )
    np.testing.assert_array_equal(again, out)
    # int64 index and a dense gate copy give the same answer
    same = R.minimax_h3_fp8_out_proj(
        d["attn_out"],
        wq,
        ws,
        np.ascontiguousarray(d["gate"]),
        d["gate_index"].astype(np.int64),
        d["residual"],
    )
    np.testing.assert_array_equal(same, out)


def test_nvfp4_out_proj(rng: np.random.Generator) -> None:
    d = _out_proj_data(200, rng)
    inv = d["invalid"]
    wq, wsf, wg = R.quantize_minimax_h3_o_weight_nvfp4(d["o_weight"])
    g_act = F.nvfp4_global_scale_from_amax(4.0)
    out = R.minimax_h3_nvfp4_out_proj(
        d["attn_out"], wq, wsf, wg, g_act, d["gate"], d["gate_index"], d["residual"]
    )
    np.testing.assert_array_equal(out[inv], f32(d["residual"])[inv])
    aq, asf = R.fp4_quantize(d["attn_out"], g_act, is_sf_swizzled_layout=False)
    a_deq = F.nvfp4_dequantize(aq, asf, g_act).astype(np.float64)
    w_deq = F.nvfp4_dequantize(wq, F.unswizzle_sf_128x4(wsf, 64, 8), wg).astype(np.float64)
    o = F.bf16_round(a_deq @ w_deq.T)
    g = f32(d["gate"])[np.clip(d["gate_index"], 0, 8)]
    p = F.bf16_round(g * o)
    ref = F.bf16_round(f32(d["residual"]) + p)
    ok = ~inv
    mag = np.maximum(np.abs(ref), np.abs(p))
    assert np.all(within_spec(out[ok], ref[ok], mag[ok]))
    again = R.minimax_h3_nvfp4_out_proj(
        d["attn_out"],
        wq,
        wsf,
        np.array([wg]),
        np.array([g_act]),
        d["gate"],
        d["gate_index"],
        d["residual"],
        act_q=aq,
        act_sf=asf,
    )
    np.testing.assert_array_equal(again, out)


# ------------------------------------------------------------------------------------------ MLP


def test_swiglu_rounding_points() -> None:
    ffn = 3
    h = np.zeros((1, 2 * ffn), np.float32)
    h[0, :ffn] = [1.0, -1.0, 0.5]
    h[0, ffn:] = [2.0, 3.0, 1.5]
    y = R.swiglu(h)
    # silu(1) = 0.73105858 -> bf16 0.73046875, x2 = 1.4609375
    # silu(-1) = -0.26894142 -> bf16 -0.26953125, x3 = -0.80859375 (exact in bf16)
    # silu(0.5) = 0.31122967 -> bf16 0.310546875, x1.5 = 0.4658203125: a bf16 tie -> 0.46484375
    np.testing.assert_array_equal(y, np.array([[1.4609375, -0.80859375, 0.46484375]], np.float32))
    assert F.bf16_round(1 / (1 + math.exp(-1.0))) == np.float32(0.73046875)


def _mlp_data(m: int, rng: np.random.Generator, d_model: int = 64, ffn: int = 128) -> dict:
    d = I.mlp_inputs(m, rows=9, d=d_model, ffn=ffn, rng=rng)
    d["w1"] = R.prepare_minimax_h3_fc1_weight_fp8(d["fc1_weight"])
    d["w2"] = R.prepare_minimax_h3_fc2_weight_fp8(d["fc2_weight"])
    return d


def _mlp(d: dict, **kw) -> R.MlpOutput:
    return R.minimax_h3_mlp_fp8_sm120(
        *prologue_args(d), d["gate"], d["residual"], *d["w1"], *d["w2"], **kw
    )


def test_mlp_vs_independent(rng: np.random.Generator) -> None:
    d = _mlp_data(200, rng)
    res = _mlp(d)
    ffn = 128
    # Independent chain on the natural-order weights.
    a = R.prologue(*prologue_args(d))
    aq, asc = F.fp8_quantize_per_token(a)
    w1q, w1s = F.fp8_quantize_per_channel(d["fc1_weight"])
    acc1 = F.e4m3_decode(aq).astype(np.float64) @ F.e4m3_decode(w1q).astype(np.float64).T
    h = F.bf16_round((acc1.astype(np.float32) * asc[:, None]) * w1s)
    t = h[:, :ffn].astype(np.float64)
    silu = F.bf16_round(t * (1.0 / (1.0 + np.exp(-t))))
    y = F.bf16_round(silu * h[:, ffn:])
    assert bf16_ulp_distance(res.y, y).max() <= 1
    assert np.count_nonzero(res.y != y) <= 4
    yq, ys = F.fp8_quantize_per_token(res.y)
    np.testing.assert_array_equal(res.y_q, yq)
    np.testing.assert_array_equal(res.y_scale, ys)
    w2q, w2s = d["w2"]
    acc2 = F.e4m3_decode(yq).astype(np.float64) @ F.e4m3_decode(w2q).astype(np.float64).T
    o = F.bf16_round((acc2.astype(np.float32) * ys[:, None]) * w2s)
    idx = d["adaln_index"]
    inv = (idx < 0) | (idx >= 9)
    p = F.bf16_round(f32(d["gate"])[np.clip(idx, 0, 8)] * o)
    ref = np.where(inv[:, None], f32(d["residual"]), F.bf16_round(f32(d["residual"]) + p))
    assert bf16_ulp_distance(res.out, ref).max() <= 1
    np.testing.assert_array_equal(res.out[inv], f32(d["residual"])[inv])
    assert not res.y[inv].any()


def test_mlp_invalid_rows_and_overrides(rng: np.random.Generator) -> None:
    d = _mlp_data(12, rng)
    idx = np.array([0, -1, 1, 9, 2, 2**40, 3, -(2**63), 4, 5, 8, 7], np.int64)
    inv = (idx < 0) | (idx >= 9)
    d["adaln_index"] = idx
    x = f32(d["x"])
    x[1] = np.nan
    x[3, :4] = np.inf
    d["x"] = x
    res = _mlp(d)
    np.testing.assert_array_equal(res.out[inv], f32(d["residual"])[inv])
    assert np.all(np.isfinite(res.out))
    # Overrides: the reference's own intermediates reproduce it; garbage in invalid rows of the
    # workspaces cannot leak into out.
    _, aq, asc = R.prologue_fp8(*prologue_args(d))
    aq[inv] = 0x7E
    again = _mlp(d, a_q=aq, a_scale=asc, y_q=res.y_q, y_scale=res.y_scale)
    np.testing.assert_array_equal(again.out, res.out)
    # gate must share the tables' row count
    bad = dict(d, gate=d["gate"][:4])
    with pytest.raises(ValueError):
        _mlp(bad)


def test_fc1_prepare_changes_only_row_order(rng: np.random.Generator) -> None:
    w = I.normal_bf16((2 * 64, 48), 0.02, rng)
    codes, scale = R.prepare_minimax_h3_fc1_weight_fp8(w)
    nat_c, nat_s = F.fp8_quantize_per_channel(w)
    src = F.fc1_prepack_source_rows(64)
    np.testing.assert_array_equal(codes, nat_c[src])
    np.testing.assert_array_equal(scale, nat_s[src])
    np.testing.assert_array_equal(F.fc1_unpack_rows(codes), nat_c)
    # the multiset of (row, scale) pairs is unchanged
    key = lambda c, s: sorted(zip(map(bytes, c), s.tolist(), strict=True))  # noqa: E731
    assert key(codes, scale) == key(nat_c, nat_s)


# ----------------------------------------------------------------------------- weight helpers


def test_fp8_weight_quantizers_are_per_row(rng: np.random.Generator) -> None:
    w = I.normal_bf16((40, 96), 0.01, rng)
    perm = rng.permutation(40)
    for fn in (
        R.quantize_minimax_h3_qkv_weight_fp8,
        R.quantize_minimax_h3_o_weight_fp8,
        R.prepare_minimax_h3_fc2_weight_fp8,
    ):
        c, s = fn(w)
        c2, s2 = fn(w[perm])
        np.testing.assert_array_equal(c2, c[perm])
        np.testing.assert_array_equal(s2, s[perm])
        amax = np.abs(f32(w)).max(1).astype(np.float64)
        np.testing.assert_array_equal(s, (amax / 448).astype(np.float32))


def test_nvfp4_weight_helpers_and_fp4_quantize(rng: np.random.Generator) -> None:
    w = I.normal_bf16((256, 64), 0.01, rng)
    for fn in (R.quantize_minimax_h3_qkv_weight_nvfp4, R.quantize_minimax_h3_o_weight_nvfp4):
        pk, sf, g = fn(w)
        assert isinstance(g, np.float32)
        assert g == np.float32(2688.0) / np.abs(f32(w)).max()
        lin_pk, lin_sf = R.fp4_quantize(w, g, is_sf_swizzled_layout=False)
        np.testing.assert_array_equal(pk, lin_pk)
        assert sf.shape == (F.swizzled_sf_nbytes(256, 4),)
        np.testing.assert_array_equal(F.unswizzle_sf_128x4(sf, 256, 4), lin_sf)
        np.testing.assert_array_equal(lin_sf, F.nvfp4_quantize(w, g)[1])
    with pytest.raises(ValueError):
        R.fp4_quantize(w, 1.0, sf_vec_size=32)


# ------------------------------------------------------------------------------------- inputs


def test_input_generators() -> None:
    cs = f32(I.rope_cache(4096 + 64 * 2 + 4))
    assert cs.shape == (4228, 96)
    np.testing.assert_array_equal(cs[0, :48], 1.0)
    np.testing.assert_array_equal(cs[0, 48:], 0.0)
    r = 4096 + 64 * 2 + 3  # positions (1, 2, 3)
    f1 = 10000.0 ** (-1 / 16)
    want = [(0, math.cos(1)), (16, math.cos(2)), (32, math.cos(3)), (49, math.sin(f1))]
    for col, v in want:
        assert cs[r, col] == F.bf16_round(v), col
    idx = I.production_index(300, rows=9, dtype=np.int32)
    assert idx.dtype == np.int32
    assert idx[50] == -1 and idx[151] == -1 and idx[60] == 9 and idx[163] == 9
    assert idx[0] == 0 and idx[299] == 8
    assert np.all(np.diff(idx[(idx >= 0) & (idx < 9)]) >= 0)
    assert np.all((I.production_index(128) >= 0) & (I.production_index(128) < 9))
    d = I.prologue_inputs(16, rows=3, k=32)
    assert d["x"].dtype == F.BF16 and d["adaln_index"].dtype == np.int64
    assert d["adaln_shift"].base is not None and d["adaln_scale"].strides == (6 * 32 * 2, 2)
    # U(-0.05, 0.05) then bf16 rounding (one bf16 ulp at 0.05 is 2^-12)
    assert np.abs(f32(d["adaln_scale"])).max() <= 0.05 + 2**-12
    assert np.abs(f32(d["gate"])).max() <= 1.0
    assert np.abs(f32(d["gate"])).max() > 0.05
    assert f32(d["x_norm_weight"]).min() >= 0.9 - 2**-8  # U(0.9, 1.1) then bf16 rounding
