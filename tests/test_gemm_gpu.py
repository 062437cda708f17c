"""GPU: the GEMM back ends (mma.sync; wgmma on sm_90a) against a float64 host GEMM of the same
operands.

Bounds (issue #3): relative Frobenius error <= 3e-3 and no element off by more than
1e-2 * max|ref| (the output is rounded to bf16, whose half-ulp is 2^-9 relative; fp32 accumulation
over K <= 14336 adds far less). Outputs poisoned before the launch; M tails included.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest

from h3cupy import formats
from h3cupy.testing import assert_gemm_close

pytestmark = pytest.mark.gpu


# issue #3's bounds (h3cupy.testing.assert_gemm_close: relative Frobenius <= 3e-3, worst element
# <= 1e-2 * max|ref|), the check of every test below
_check = assert_gemm_close


def _backend(name):
    from h3cupy.core import arch
    from h3cupy.ops import gemm

    if name == "wgmma" and arch.current_target() != "sm_90a":
        pytest.skip("the wgmma back end needs sm_90a")
    if name.startswith("mma_tma") and arch.current_target() not in ("sm_90a", "sm_120a"):
        pytest.skip("the TMA-fed mma.sync back end needs sm_90a or sm_120a")
    return {
        "mma_sync": gemm.gemm_mma_sync,
        "wgmma": gemm.gemm_wgmma,
        "mma_tma": gemm.gemm_mma_tma,
        "mma_tma_t0": functools.partial(gemm.gemm_mma_tma, ws=False),
        # the plan sm_120 boards run (64-byte k-tiles in 99 KiB), forced on the H200
        "mma_tma_sm120": functools.partial(gemm.gemm_mma_tma, sm120_plan=True),
    }[name]


BACKENDS = ["mma_sync", "wgmma", "mma_tma", "mma_tma_t0", "mma_tma_sm120"]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("m", [1, 129, 300])
def test_gemm_bf16(m, backend, rng):
    import cupy

    from h3cupy.testing import download, poison

    gemm_mma_sync = _backend(backend)

    a = formats.to_bf16(rng.normal(0, 0.5, (m, 5376)).astype(np.float32))
    b = formats.to_bf16(rng.normal(0, 0.01, (384, 5376)).astype(np.float32))
    out = cupy.empty((m, 384), formats.BF16)
    poison(out)
    gemm_mma_sync(cupy.asarray(a), cupy.asarray(b), fmt="bf16", out=out)
    _check(download(out).astype(np.float32), a.astype(np.float64) @ b.astype(np.float64).T)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("m", [1, 129, 300])
def test_gemm_e4m3_scaled(m, backend, rng):
    import cupy

    from h3cupy.testing import download, poison

    gemm_mma_sync = _backend(backend)

    a = formats.to_bf16(rng.normal(0, 0.5, (m, 7168)).astype(np.float32))
    w = formats.to_bf16(rng.normal(0, 0.01, (256, 7168)).astype(np.float32))
    aq, as_ = formats.fp8_quantize_per_token(a)
    wq, ws = formats.fp8_quantize_per_channel(w)
    out = cupy.empty((m, 256), formats.BF16)
    poison(out)
    gemm_mma_sync(
        cupy.asarray(aq),
        cupy.asarray(wq),
        fmt="e4m3",
        row_scale=cupy.asarray(as_),
        col_scale=cupy.asarray(ws),
        out=out,
    )
    ref = (
        (formats.e4m3_decode(aq).astype(np.float64) @ formats.e4m3_decode(wq).astype(np.float64).T)
        * as_[:, None]
        * ws[None, :]
    )
    _check(download(out).astype(np.float32), ref)


# NOTE: the ping-pong schedule's first version deadlocked on the H200 (stale parity waits, see
# gemm_sm90.cuh). The fixed version passed on the H200 (2026-12-01, every GPU round since sets
# H3CUPY_TEST_PINGPONG=1 and runs these under a timeout); it stays opt-in elsewhere because it is
# a benchmark-only schedule whose failure mode is a hang.
PINGPONG_SKIP = "ping-pong schedule (benchmark-only, opt-in): set H3CUPY_TEST_PINGPONG=1"


def _pingpong_enabled() -> bool:
    import os

    return os.environ.get("H3CUPY_TEST_PINGPONG") == "1"


def _wgmma_variant_ids():
    from h3cupy.ops.gemm import WGMMA_VARIANTS

    return [f"{f}-n{n}-p{p}-x{c}{'-pingpong' if pp else ''}" for f, n, p, c, pp in WGMMA_VARIANTS]


def _operands(rng, fmt, m, n, k):
    """Random operands in the model's ranges and the float64 reference of the same quantized
    values: activations ~N(0, 0.5), weights ~N(0, 0.01); FP8 per-token x per-channel."""
    a = formats.to_bf16(rng.normal(0, 0.5, (m, k)).astype(np.float32))
    w = formats.to_bf16(rng.normal(0, 0.01, (n, k)).astype(np.float32))
    if fmt == "bf16":
        return (a, w, None, None), a.astype(np.float64) @ w.astype(np.float64).T
    aq, as_ = formats.fp8_quantize_per_token(a)
    wq, ws = formats.fp8_quantize_per_channel(w)
    ref = (
        (formats.e4m3_decode(aq).astype(np.float64) @ formats.e4m3_decode(wq).astype(np.float64).T)
        * as_[:, None]
        * ws[None, :]
    )
    return (aq, wq, as_, ws), ref


# (M, N, K): M tails (300: an odd number of M-tiles, so one CTA of a cluster pair computes rows
# past M only), N tails (520, 1000 are not multiples of the tile), every H3 K, and a grid with more
# tiles than SMs (each CTA runs several tiles; the stage ring wraps across tile boundaries).
WGMMA_SHAPES = [(1, 512, 5376), (129, 520, 7168), (300, 1000, 14336), (2000, 2560, 2048)]


@pytest.mark.parametrize("shape", WGMMA_SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize(
    "variant", list(range(len(_wgmma_variant_ids()))), ids=_wgmma_variant_ids()
)
def test_gemm_wgmma_variants(variant, shape, rng):
    import cupy

    from h3cupy.ops import gemm
    from h3cupy.testing import download, poison

    _backend("wgmma")
    fmt, tile_n, promote, cluster, pingpong = gemm.WGMMA_VARIANTS[variant]
    if pingpong and not _pingpong_enabled():
        pytest.skip(PINGPONG_SKIP)
    m, n, k = shape
    if fmt == "e4m3" and not promote and k > 7168:
        # NOTE: without promotion Hopper's FP8 wgmma accumulator (~14 bits) measured rel. Frobenius
        # 3.3e-3 at K = 14336 on the H200 (2026-12-01), over the 3e-3 bound: the unpromoted
        # variants are benchmark-only there, and the library's FP8 default promotes.
        pytest.skip("unpromoted FP8 exceeds the error bound at K > 7168 (benchmark-only)")
    (a, w, as_, ws), ref = _operands(rng, fmt, m, n, k)
    out = cupy.empty((m, n), formats.BF16)
    poison(out)
    gemm.gemm_wgmma(
        cupy.asarray(a),
        cupy.asarray(w),
        fmt=fmt,
        row_scale=None if as_ is None else cupy.asarray(as_),
        col_scale=None if ws is None else cupy.asarray(ws),
        out=out,
        tile_n=tile_n,
        promote=promote,
        cluster=cluster,
        pingpong=pingpong,
    )
    _check(download(out).astype(np.float32), ref)


@pytest.mark.parametrize("shape", WGMMA_SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("cluster", [1, 2], ids=lambda c: f"x{c}")
def test_gemm_wgmma_m192(cluster, shape, rng):
    """The benchmark-only 192 x 192 bf16 tiles (three consumer warpgroups): M tails (1, 129:
    one 192-row tile mostly past M; 2000: 11 M-tiles, so in clusters one CTA of the last pair
    computes rows past M only), N tails (520, 1000 are not multiples of 192), every H3 K, and more
    tiles than SMs (the ring wraps across tiles)."""
    import cupy

    from h3cupy.ops import gemm
    from h3cupy.testing import download, poison

    _backend("wgmma")
    m, n, k = shape
    (a, w, _, _), ref = _operands(rng, "bf16", m, n, k)
    out = cupy.empty((m, n), formats.BF16)
    poison(out)
    gemm.gemm_wgmma(cupy.asarray(a), cupy.asarray(w), out=out, tile_m=192, cluster=cluster)
    _check(download(out).astype(np.float32), ref)


def test_gemm_wgmma_m192_rejects():
    """tile_m other than 128 / 192, or tile_m=192 with anything but its own variant: a
    ValueError naming the argument, raised before any launch."""
    import cupy

    from h3cupy.ops import gemm

    _backend("wgmma")
    a = cupy.ones((256, 128), formats.BF16)
    bad = (
        ({"tile_m": 64}, "tile_m"),
        ({"tile_m": 192, "tile_n": 256}, "tile_n=256"),
        ({"tile_m": 192, "cluster": 4}, "cluster=4"),
        ({"tile_m": 192, "fmt": "e4m3"}, "fmt='e4m3'"),
    )
    for kw, named in bad:
        b = cupy.full((256, 128), 0x38, cupy.uint8) if kw.get("fmt") == "e4m3" else a
        with pytest.raises(ValueError, match=named):
            gemm.gemm_wgmma(b, b, **kw)


# NOTE: the engine's default FP8 tiles (128 x 192, single CTAs) at the O and FC2 shapes, M =
# 4824: 38 x 28 = 1064 = 8 x 132 + 8 tiles, so the last round's 8 tiles run as 4 k-ranges each
# (gemm.TAIL_SPLIT, on by default); each shape against the same call with the split off.
# bf16 (tile widths forced): 256 columns at 4824 x 5376 (19 x 21 = 399 = 6 x 66 + 3 pairs) and
# 224 columns at 4824 x 7168 (19 x 32 = 608 = 9 x 66 + 14 pairs), both split 4 ways. A sixth
# field forces the cluster size: the FP8 n192 tiles on single CTAs (38 x 28 = 1064 = 8 x 132 + 8
# tiles, the default's) and in pairs (19 x 28 = 532 = 8 x 66 + 4 pairs).
TAIL_CASES = [
    ("e4m3", None, 4824, 5376, 7168),
    ("e4m3", None, 4824, 5376, 14336),
    ("bf16", 256, 4824, 5376, 7168),
    ("bf16", 224, 4824, 7168, 5376),
    ("e4m3", 192, 4824, 5376, 7168, 1),
    ("e4m3", 192, 4824, 5376, 7168, 2),
]


def _tail_id(c) -> str:
    return f"{c[0]}-n{c[1]}-{c[2]}x{c[3]}x{c[4]}" + (f"-x{c[5]}" if len(c) > 5 else "")


@pytest.mark.parametrize("split", (True, False))
@pytest.mark.parametrize("case", TAIL_CASES, ids=_tail_id)
def test_gemm_wgmma_tail_split(case, split, rng, monkeypatch):
    """The plain engine GEMM (FP8 default tiles; bf16 256- and 224-column tiles) at M = 4824 with
    and without the tail split, against a float64 GEMM of the same (quantized) operands (cuBLAS
    DGEMM on the device: the host would take minutes), within issue #3's bounds; the split's
    output is the same bytes run to run."""
    import cupy

    from h3cupy.ops import gemm
    from h3cupy.testing import poison

    _backend("wgmma")
    monkeypatch.setattr(gemm, "TAIL_SPLIT", split)
    fmt, tile_n, m, n, k = case[:5]
    cluster = case[5] if len(case) > 5 else None
    a = formats.to_bf16(rng.normal(0, 0.5, (m, k)).astype(np.float32))
    w = formats.to_bf16(rng.normal(0, 0.01, (n, k)).astype(np.float32))
    if fmt == "e4m3":
        aq, as_ = formats.fp8_quantize_per_token(a)
        wq, ws = formats.fp8_quantize_per_channel(w)
        a_d, w_d, as_d, ws_d = (cupy.asarray(x) for x in (aq, wq, as_, ws))
        ref = (
            cupy.asarray(formats.e4m3_decode(aq), np.float64)
            @ cupy.asarray(formats.e4m3_decode(wq), np.float64).T
        )
        ref *= as_d[:, None].astype(np.float64) * ws_d[None, :].astype(np.float64)
        kw = dict(fmt="e4m3", row_scale=as_d, col_scale=ws_d, tile_n=tile_n, cluster=cluster)
    else:
        a_d, w_d = cupy.asarray(a), cupy.asarray(w)
        ref = cupy.asarray(a.astype(np.float64)) @ cupy.asarray(w.astype(np.float64)).T
        kw = dict(fmt="bf16", tile_n=tile_n, cluster=cluster)
    outs = []
    for _ in range(2):
        out = cupy.empty((m, n), formats.BF16)
        poison(out)
        gemm.gemm_wgmma(a_d, w_d, out=out, **kw)
        outs.append(out.view(np.uint16))
    assert bool((outs[0] == outs[1]).all()), "two runs differ"
    got = cupy.asarray(outs[0].view(formats.BF16).get().astype(np.float32), np.float64)
    assert bool(cupy.isfinite(got).all()), "non-finite output (unwritten or overflow)"
    rel = float(cupy.linalg.norm(got - ref) / cupy.linalg.norm(ref))
    worst = float(cupy.abs(got - ref).max() / cupy.abs(ref).max())
    # issue #3's bounds (relative Frobenius 3e-3, any element 1e-2 of max|ref|)
    assert rel <= 3e-3 and worst <= 1e-2, (rel, worst)


# (M, N, K, splits): both activation tiles (n16: M <= 16, n136: M <= 136) and their tails, N
# tails (520, 1000: a partial last weight tile), split-K with uneven k ranges (K = 7168: 112
# k-tiles over 3 splits), no split, and the split the model picks (None).
SWAPAB_CASES = [
    (1, 512, 5376, None),
    (1, 520, 7168, 3),
    (16, 1000, 5376, 1),
    (17, 512, 14336, 4),
    (129, 1000, 7168, None),
    (136, 520, 5376, 2),
]


@pytest.mark.parametrize("case", SWAPAB_CASES, ids=lambda c: "x".join(map(str, c)))
def test_gemm_wgmma_small_m(case, rng):
    """The swap-AB small-M path (gemm_wgmma_small_m): bf16 within the engine's bounds against the
    float64 product (SPEC §8's GEMM bound, as above), output poisoned first, two runs bitwise
    equal (the split-K partials are summed in split order)."""
    import cupy

    from h3cupy.ops import gemm
    from h3cupy.testing import download, poison

    _backend("wgmma")
    m, n, k, splits = case
    (a, w, _, _), ref = _operands(rng, "bf16", m, n, k)
    out = cupy.empty((m, n), formats.BF16)
    poison(out)
    gemm.gemm_wgmma_small_m(cupy.asarray(a), cupy.asarray(w), out=out, splits=splits)
    first = download(out)
    _check(first.astype(np.float32), ref)
    poison(out)
    gemm.gemm_wgmma_small_m(cupy.asarray(a), cupy.asarray(w), out=out, splits=splits)
    assert np.array_equal(download(out).view(np.uint16), first.view(np.uint16))


@pytest.mark.parametrize("m", [1, 129])
def test_gemm_wgmma_bf16_scaled_small_m(m, rng):
    """bf16 with row and column scales at M <= 136 through gemm_wgmma: the swap-AB kernels apply
    no scales, so gemm_wgmma must keep such calls on the scaling engine path (passed on the H200,
    2026-12-01, session 6)."""
    import cupy

    from h3cupy.ops import gemm
    from h3cupy.testing import download, poison

    _backend("wgmma")
    n, k = 520, 5376
    (a, w, _, _), ref = _operands(rng, "bf16", m, n, k)
    rs = rng.uniform(0.5, 2.0, m).astype(np.float32)
    cs = rng.uniform(0.5, 2.0, n).astype(np.float32)
    out = cupy.empty((m, n), formats.BF16)
    poison(out)
    gemm.gemm_wgmma(
        cupy.asarray(a),
        cupy.asarray(w),
        fmt="bf16",
        row_scale=cupy.asarray(rs),
        col_scale=cupy.asarray(cs),
        out=out,
    )
    _check(download(out).astype(np.float32), ref * rs[:, None] * cs[None, :])


@pytest.mark.parametrize("backend", BACKENDS)
def test_gemm_deterministic(backend, rng):
    import cupy

    gemm_mma_sync = _backend(backend)

    a = cupy.asarray(formats.to_bf16(rng.normal(0, 0.5, (257, 5376)).astype(np.float32)))
    b = cupy.asarray(formats.to_bf16(rng.normal(0, 0.01, (256, 5376)).astype(np.float32)))
    r1 = gemm_mma_sync(a, b).view(cupy.uint16)
    r2 = gemm_mma_sync(a, b).view(cupy.uint16)
    assert bool((r1 == r2).all())


@pytest.mark.parametrize("fmt", ["bf16", "e4m3"])
def test_gemm_mma_tma_ws_many_tiles(fmt, rng):
    """The mma.sync back end's two forms, a producer warpgroup (``ws=True``, the default) and
    thread 0 of the consumers issuing the loads (``ws=False``), over several tiles per CTA (the
    ring wraps across tiles: 35 x 12 = 420 tiles; where s15-g's unfenced release raced), an M tail
    (4372 = 34 x 128 + 20) and an N tail (the last tile 136 wide): the same bits from both (each
    tile accumulates in the same order) and within the bound against float64. The sm_120 plan
    (64-byte k-tiles, the same k order per accumulator) gives the same bits too."""
    import cupy

    from h3cupy.core import arch
    from h3cupy.ops import gemm
    from h3cupy.testing import download, poison

    _backend("mma_tma")
    if arch.smem_optin(arch.current_device()) < gemm.mt_smem(gemm.MT_BIG):
        pytest.skip("compares with the 128-byte ring, which needs Hopper's 225 KiB of smem")
    m, n, k = 4372, 2952, 2048
    a = formats.to_bf16(rng.normal(0, 0.5, (m, k)).astype(np.float32))
    w = formats.to_bf16(rng.normal(0, 0.01, (n, k)).astype(np.float32))
    kw = {}
    if fmt == "e4m3":
        a, rs = formats.fp8_quantize_per_token(a)
        w, cs = formats.fp8_quantize_per_channel(w)
        a64, w64 = (formats.e4m3_decode(x).astype(np.float64) for x in (a, w))
        ref = (a64 @ w64.T) * rs[:, None] * cs[None, :]
        kw = {"row_scale": cupy.asarray(rs), "col_scale": cupy.asarray(cs)}
    else:
        ref = a.astype(np.float64) @ w.astype(np.float64).T
    outs = []
    forms = {"ws": {"ws": True}, "sm120": {"sm120_plan": True}}
    for form in ({"ws": False}, *forms.values()):
        out = cupy.empty((m, n), formats.BF16)
        poison(out)
        gemm.gemm_mma_tma(cupy.asarray(a), cupy.asarray(w), fmt=fmt, out=out, **form, **kw)
        outs.append(out.view(cupy.uint16))
    for i, name in enumerate(forms, 1):
        assert bool((outs[0] == outs[i]).all()), f"the {name} form differs from the thread-0 form"
    _check(download(outs[1].view(formats.BF16)).astype(np.float32), ref)


# (M, N, K): M tails, N = 384 (the last 256-wide tile has one 128-row scale group), every H3 K.
NVFP4_SHAPES = [(1, 512, 5376), (129, 384, 7168), (300, 512, 14336)]


@pytest.mark.parametrize("swizzled", [False, True], ids=["linear", "swizzled"])
@pytest.mark.parametrize("shape", [(1, 5376), (130, 5376), (300, 7168), (257, 48)], ids=str)
def test_nvfp4_dequantize_bf16(shape, swizzled, rng):
    """The Hopper NVFP4 path's dequantization launch (a' of activations with linear scales, w' of
    weights with 128x4-swizzled ones) against formats.nvfp4_dequantize with global scale 1: code x
    scale is exact in bf16 (a 2-bit by 4-bit significand), so the bits must match, no tolerance.
    K = 5376 and 48 leave a warp's last 1024-value task of each row partly empty."""
    import cupy

    from h3cupy.core import arch, interop
    from h3cupy.ops import gemm
    from h3cupy.testing import download, poison

    if not arch.supports_fp8(arch.current_target()):
        pytest.skip("the NVFP4 helpers need sm_89 or newer")
    rows, k = shape
    scale = 0.01 if swizzled else 0.5  # weights ~N(0, 0.01), activations ~N(0, 0.5)
    x = formats.to_bf16(rng.normal(0, scale, (rows, k)).astype(np.float32))
    g = formats.nvfp4_global_scale_from_amax(np.abs(x.astype(np.float32)).max())
    q, sf = formats.nvfp4_quantize(x, g)
    want = formats.nvfp4_dequantize(q, sf, 1.0).astype(formats.BF16)
    out = cupy.empty((rows, k), formats.BF16)
    poison(out)
    sf_dev = formats.swizzle_sf_128x4(sf) if swizzled else sf
    t = [interop.as_tensor(cupy.asarray(a), n) for a, n in ((q, "q"), (sf_dev, "sf"), (out, "out"))]
    gemm.nvfp4_dequantize_bf16(*t, swizzled=swizzled)
    assert np.array_equal(download(out).view(np.uint16), want.view(np.uint16))


@pytest.mark.parametrize("shape", NVFP4_SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_gemm_nvfp4(shape, rng):
    """NVFP4 x NVFP4 (sm_90a: exact dequantization to bf16 in registers) against the float64
    block-scaled product of the same codes and scales; alpha given on the host, and formed on the
    device from device global scales (the same fp32 value, so the same bits)."""
    import cupy

    from h3cupy.core import arch
    from h3cupy.ops import gemm
    from h3cupy.reference._common import nvfp4_alpha, nvfp4_linear
    from h3cupy.testing import download, nvfp4_gemm_operands, poison

    if arch.current_target() not in ("sm_90a", "sm_120a"):
        pytest.skip("the NVFP4 GEMM needs sm_90a or sm_120a")
    m, n, k = shape
    aq, asf, wq, wsf, ga, gw = nvfp4_gemm_operands(rng, m, n, k)
    alpha = nvfp4_alpha(ga, gw)
    ref = nvfp4_linear(aq, asf, wq, wsf, alpha).astype(np.float64)
    dev = [cupy.asarray(x) for x in (aq, asf, wq, wsf)]
    out = cupy.empty((m, n), formats.BF16)
    poison(out)
    gemm.gemm_nvfp4(*dev, alpha=float(alpha), out=out)
    got = download(out).astype(np.float32)
    _check(got, ref)
    out2 = cupy.empty((m, n), formats.BF16)
    poison(out2)
    gemm.gemm_nvfp4(
        *dev,
        a_global_scale=cupy.asarray(np.array([ga], np.float32)),
        b_global_scale=float(gw),
        out=out2,
    )
    assert np.array_equal(download(out2).view(np.uint16), download(out).view(np.uint16))


def test_launch_over_the_shared_memory_limit():
    """A kernel asking for more shared memory than the GPU's opt-in limit (what the Hopper-sized
    plans would ask of an sm_120 board) fails with a message naming both sizes, not an opaque
    driver error."""
    from h3cupy.core import arch, jit, launch
    from h3cupy.ops import gemm

    _backend("mma_tma")
    dev = arch.current_device()
    kernel = jit.get_kernel(
        gemm.GEMM_MMA_TMA, "h3::gemm_mma_tma_smxx<0, false, 1>", arch.current_target()
    )
    limit = arch.smem_optin(dev)
    assert limit >= gemm.mt_smem(gemm.MT_SM120)
    with pytest.raises(RuntimeError, match=f"needs {limit + 1024} bytes.*at most {limit}"):
        launch._unlock_smem(kernel, limit + 1024)


_SHORT_SMEM = """
import cupy as cp
import numpy as np
from h3cupy import formats
from h3cupy.ops import gemm
gemm._SMEM -= 16  # the host's mirror 16 bytes short of the kernel's layout
a = cp.asarray(formats.to_bf16(np.ones((128, 64), np.float32)))
gemm.gemm_mma_sync(a, a)
cp.cuda.runtime.deviceSynchronize()
print("NO TRAP")
"""


def test_launch_below_the_kernel_layout_traps():
    """A launch given less dynamic shared memory than the kernel lays out (a host mirror of the
    layout that fell behind the C++, as in session 18) stops with a device trap instead of running
    past the allocation. In a subprocess: the trap leaves its CUDA context unusable."""
    import subprocess
    import sys

    _backend("mma_sync")
    proc = subprocess.run(
        [sys.executable, "-c", _SHORT_SMEM], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode != 0 and "NO TRAP" not in proc.stdout, proc.stdout + proc.stderr
    # a device trap reaches the host as cudaErrorLaunchFailure (measured on the H200, s19-a)
    assert "unspecified launch failure" in proc.stderr.lower(), proc.stderr[-2000:]
