"""GPU: minimax_h3_mlp_fp8_sm120 against the reference (SPEC §6, bounds §8 MLP): y and out within
1e-2 + 1.6e-2*mag + 2*ulp_bf16(mag) with at most max(4, 2e-7*numel) violations, the reference
consuming the kernel's own a_q / a_scale and y_q / y_scale; y_q / y_scale bit-exact to the host FP8
of the kernel's y; invalid-index rows equal residual exactly; out aliasing residual or x.
Workspaces and outputs NaN-poisoned first."""

from __future__ import annotations

import numpy as np
import pytest

from h3cupy.testing import need_sm90a
from h3cupy.verify import (
    check_mlp_fp8,  # at module level: a missing name fails collection on CPU too
)

pytestmark = pytest.mark.gpu


def _need_sm90():
    need_sm90a("the MLP op")


@pytest.mark.parametrize("m", (1, 127, 129, 255, 257, 4097, 4824))
def test_mlp_fp8(m, rng):

    _need_sm90()
    results = check_mlp_fp8(m, rng, index_dtype=np.int64 if m % 2 else np.int32)
    bad = [r.row() for r in results if not r.passed]
    assert not bad, "\n".join(bad)


# NOTE: from gemm.FP8_OPS_CLUSTER2_FROM_M (16384) tokens on, FC1 and FC2 run clusters of two by
# default (gemm.fp8_ops_cluster): 19296 (151 M-tile pairs) and 149796 (586 pairs, the last one's
# second tile past M) run that path; the tests above run single CTAs.
@pytest.mark.parametrize("fused", (True, False))
def test_mlp_fp8_clusters_by_m(fused, rng, monkeypatch):
    """M = 19296 (a production centre), y quantized in FC2's launch or apart: same checks."""
    from h3cupy.ops import gemm, mlp

    _need_sm90()
    assert gemm.fp8_ops_cluster(19296) == 2
    monkeypatch.setattr(mlp, "FUSED_QUANT", fused)
    results = check_mlp_fp8(19296, rng)
    bad = [r.row() for r in results if not r.passed]
    assert not bad, "\n".join(bad)


def test_mlp_fp8_largest_m(rng):
    """M = 149796 (the seed's largest; y alone is 4.3 GB, its element offsets pass 2^31): out and
    y on sampled rows against the reference, y_q / y_scale exact on 2048 sampled rows."""
    _need_sm90()
    results = check_mlp_fp8(149796, rng, index_dtype=np.int64)
    bad = [r.row() for r in results if not r.passed]
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("alias", ("residual", "x"))
def test_mlp_fp8_out_aliasing(alias, rng):

    _need_sm90()
    results = check_mlp_fp8(257, rng, alias=alias)
    bad = [r.row() for r in results if not r.passed]
    assert not bad, "\n".join(bad)


def test_mlp_errors(rng):
    import cupy

    from h3cupy import formats
    from h3cupy.ops.mlp import minimax_h3_mlp_fc2_flags_sm120
    from h3cupy.ops.mlp import minimax_h3_mlp_fp8_sm120 as op

    _need_sm90()
    m = 32
    x = cupy.zeros((m, 5376), formats.BF16)
    w = cupy.ones((5376,), formats.BF16)
    tab = cupy.zeros((9, 5376), formats.BF16)
    idx = cupy.zeros((m,), np.int64)
    w1 = cupy.zeros((28672, 5376), np.uint8)
    s1 = cupy.ones((28672,), np.float32)
    w2 = cupy.zeros((5376, 14336), np.uint8)
    s2 = cupy.ones((5376,), np.float32)
    args = (x, w, tab, tab, idx, tab, x, w1, s1, w2, s2)
    with pytest.raises(ValueError, match=r"fp8_mma_form: expected one of"):
        op(*args, fp8_mma_form=1)
    with pytest.raises(ValueError, match=r"gate: expected the AdaLN tables' row count 9"):
        op(*args[:5], tab[:4], *args[6:])
    # the flags also hold FC2's tail-split counters and partial sums: too short is refused
    need = minimax_h3_mlp_fc2_flags_sm120(m)
    with pytest.raises(ValueError, match=rf"workspace_flags: expected at least {need} int32"):
        op(*args, workspace_flags=cupy.zeros((5,), np.int32))
    with pytest.raises(ValueError, match=r"workspace_flags: expected a 1-D int32 array"):
        op(*args, workspace_flags=cupy.zeros((need, 1), np.int32))
    with pytest.raises(ValueError, match=r"eps: expected a positive finite float"):
        op(*args, eps=0.0)
    # at least one ready flag per 128-row tile of y
    assert minimax_h3_mlp_fc2_flags_sm120(129) >= 2


# FC1's single launch (mlp.FC1_FUSED_PROLOGUE, single CTAs on 128 x 192 tiles at M > 256): the
# FC1 kernel writes a_q and a_scale itself, the first round's rows by the consumer warps, the
# rest by the spare producer warps in three passes per row; M = 257 has every row in the first
# round, 4097 / 4824 the rest in the spare warps (int32 and int64 indices, some invalid).
@pytest.mark.parametrize("m", (257, 4097, 4824))
def test_mlp_fp8_fc1_single_launch(m, rng, monkeypatch):
    """The reference checks of test_mlp_fp8 (and the flags: FC1's counters after FC2's), with
    a second eager run and a CUDA-graph replay at M = 4824, bytewise."""
    from h3cupy.ops import mlp

    _need_sm90()
    monkeypatch.setattr(mlp, "FC1_FUSED_PROLOGUE", True)
    results = check_mlp_fp8(m, rng, index_dtype=np.int64 if m % 2 else np.int32, graph=m == 4824)
    bad = [r.row() for r in results if not r.passed]
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("m", (4824, 9648))
def test_mlp_fp8_fc1_single_launch_same_bytes(m, rng, monkeypatch):
    """FC1's single launch gives the prologue launch's bytes: a_q and a_scale (the prologue
    kernel's arithmetic, reduction order and quantization; invalid indices give zero rows with
    s = RN(1e-12 / 448)), hence y, y_q, y_scale and out, eager twice; every workspace poisoned
    before each run."""
    import cupy

    from h3cupy import formats
    from h3cupy.ops import mlp
    from h3cupy.testing import download, poison
    from h3cupy.verify import mlp_fp8_operands

    _need_sm90()
    _, _, dev, weights = mlp_fp8_operands(m, rng, np.int32)
    ws = {
        "workspace_a_q": cupy.empty((m, 5376), np.uint8),
        "workspace_a_scale": cupy.empty((m,), np.float32),
        "workspace_y": cupy.empty((m, mlp.FFN), formats.BF16),
        "workspace_y_q": cupy.empty((m, mlp.FFN), np.uint8),
        "workspace_y_scale": cupy.empty((m,), np.float32),
    }
    out = cupy.empty((m, 5376), formats.BF16)

    def run():
        poison(out, *ws.values())
        mlp.minimax_h3_mlp_fp8_sm120(*dev.values(), *weights, out=out, **ws)
        return [download(t).view(np.uint8) for t in (out, *ws.values())]

    names = ("out", *ws)
    monkeypatch.setattr(mlp, "FC1_FUSED_PROLOGUE", False)
    want = run()
    monkeypatch.setattr(mlp, "FC1_FUSED_PROLOGUE", True)
    for attempt in ("eager 1", "eager 2"):
        got = run()
        for name, a, b in zip(names, want, got, strict=True):
            assert np.array_equal(a, b), f"{name} differs ({attempt})"


@pytest.mark.parametrize("m", (129, 4824))
def test_mlp_fp8_separate_y_quantization(m, rng, monkeypatch):
    """y's per-token FP8 as a launch of its own (FUSED_QUANT = False; the tests above run the
    default, FC2 quantizing y inside its launch behind the workspace_flags counters)."""
    from h3cupy.ops import mlp

    _need_sm90()
    monkeypatch.setattr(mlp, "FUSED_QUANT", False)
    results = check_mlp_fp8(m, rng)
    bad = [r.row() for r in results if not r.passed]
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("fused", (True, False))
def test_mlp_fp8_other_cluster(fused, rng, monkeypatch):
    """FC1 and FC2 with the other gemm.FP8_CLUSTER (single CTAs or clusters of two on the
    128 x 192 tiles; the tests above run the default), y quantized in FC2's launch or apart."""
    from h3cupy.ops import gemm, mlp

    _need_sm90()
    monkeypatch.setattr(gemm, "FP8_CLUSTER", 3 - gemm.FP8_CLUSTER)
    monkeypatch.setattr(mlp, "FUSED_QUANT", fused)
    results = check_mlp_fp8(4824, rng)
    bad = [r.row() for r in results if not r.passed]
    assert not bad, "\n".join(bad)


def test_mlp_fp8_no_tail_split(rng, monkeypatch):
    """FC2 (the out_proj kernel, K = 14336) with gemm.TAIL_SPLIT off (the tests above run it
    on: at M = 4824 the last round's 4 of 532 tile pairs as 4 k-ranges of 28 k-tiles)."""
    from h3cupy.ops import gemm

    _need_sm90()
    monkeypatch.setattr(gemm, "TAIL_SPLIT", False)
    results = check_mlp_fp8(4824, rng)
    bad = [r.row() for r in results if not r.passed]
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("m", (1, 129, 4097))
def test_mlp_fp8_mma_backend(m, rng, monkeypatch):
    """The MLP on the TMA-fed mma.sync back end (its sm_120a path: FC1 + SwiGLU in the mma
    fragment, the y quantization launch, FC2 on out_proj's mma kernel), same checks, out aliasing
    x included."""
    from h3cupy.ops import out_proj

    _need_sm90()
    monkeypatch.setattr(out_proj, "BACKEND", "mma")
    results = check_mlp_fp8(m, rng, index_dtype=np.int32 if m % 2 else np.int64)
    results += check_mlp_fp8(m, rng, alias="x")
    bad = [r.row() for r in results if not r.passed]
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("form", ("two-launch", "fused", "mma"))
def test_mlp_fp8_graph(form, rng, monkeypatch):
    """Every workspace supplied: a second eager run and a CUDA-graph replay (fresh stream, no
    allocation or host sync inside; the flag memset is captured too) give the first run's bytes
    in out and every workspace, in every form."""
    from h3cupy.ops import mlp, out_proj

    _need_sm90()
    monkeypatch.setattr(mlp, "FUSED_QUANT", form == "fused")
    monkeypatch.setattr(out_proj, "BACKEND", "mma" if form == "mma" else "auto")
    results = check_mlp_fp8(257, rng, graph=True)
    bad = [r.row() for r in results if not r.passed]
    assert not bad, "\n".join(bad)


def test_swiglu_silu_exhaustive():
    """The FC1 epilogue's silu (quant.cuh silu_approx: approximate exp2 and reciprocal) for every
    finite bf16 g, rounded to bf16 as FC1 rounds it, against bf16(g / (1 + exp(-g))) evaluated in
    float64 (the reference's silu): at most one bf16 ulp apart, and equal for all but a tiny
    fraction (a few fp32 ulps of error flip a bf16 rounding only next to a tie)."""
    import cupy

    from h3cupy import formats
    from h3cupy.core import interop
    from h3cupy.core.launch import i32, launch, ptr
    from h3cupy.testing import poison
    from h3cupy.weights import _kernel

    _need_sm90()
    bits = cupy.arange(65536, dtype=np.uint32).astype(np.uint16)
    silu = cupy.empty(65536, np.float32)
    poison(silu)
    t = [interop.as_tensor(bits, "bits"), interop.as_tensor(silu, "silu")]
    launch(
        _kernel("swiglu_silu_probe_smxx", bits.device.id),
        256,
        256,
        (ptr(t[0]), i32(65536), ptr(t[1])),
        tensors=t,
    )
    g = (cupy.asnumpy(bits).astype(np.uint32) << 16).view(np.float32)
    fin = np.isfinite(g)
    g64 = g[fin].astype(np.float64)
    with np.errstate(over="ignore"):
        want = formats.bf16_round(g64 / (1.0 + np.exp(-g64)))
    got = formats.bf16_round(cupy.asnumpy(silu)[fin])
    assert not np.isnan(got).any(), "silu_approx returned NaN for a finite input"
    # NOTE: below g ~ -87.3 the reciprocal of 1 + exp(-g) (> 2^126) flushes to zero (ftz), so
    # silu_approx returns -0 where silu is below ~1e-36 in magnitude: compared as "tiny" there.
    tiny = np.abs(want) < 2.0**-100
    assert bool((np.abs(got[tiny]) < 2.0**-100).all()), "a tiny silu came back large"
    w, o = want[~tiny].astype(np.float64), got[~tiny].astype(np.float64)
    # one bf16 ulp of the larger magnitude (bf16 spacing 2^(e - 7) for a normal value)
    ulp = np.exp2(np.floor(np.log2(np.maximum(np.maximum(np.abs(w), np.abs(o)), 2.0**-126))) - 7)
    diff = np.abs(o - w)
    assert bool((diff <= ulp).all()), f"{int((diff > ulp).sum())} values more than 1 ulp off"
    # a bound on how often the bf16 rounding flips: ~1e-4 of the inputs expected (a few fp32 ulps
    # of error against the 2^16 fp32 ulps of one bf16 step)
    flips = int((diff > 0).sum())
    assert flips <= 0.002 * w.size, f"{flips} of {w.size} silu values differ from the reference"
