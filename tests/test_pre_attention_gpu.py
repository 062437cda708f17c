"""GPU: minimax_h3_bf16_pre_attention against the float64 reference (SPEC §3).

Bounds (SPEC §8, BF16 op outputs): |out - ref| <= 1e-2 + 1e-2*mag + 2*ulp_bf16(mag), mag the
larger of |ref| and its RoPE partner on dims [0, 96) (a rotated pair can cancel); the reference
recomputes the prologue and the GEMM in float64 from the same bf16 inputs, so the bound covers
the fp32 summation order and the rsqrt approximation. Rows with an invalid AdaLN index exactly 0.
Outputs and the workspace are NaN-poisoned before the launch (h3cupy.verify).
"""

from __future__ import annotations

import numpy as np
import pytest

from h3cupy.testing import assert_passed, need_sm90a
from h3cupy.verify import (  # at module level: a missing name fails collection on CPU too
    check_pre_attention_bf16,
    check_pre_attention_fp8,
    check_pre_attention_nvfp4,
)

pytestmark = pytest.mark.gpu

MS = (1, 127, 128, 129, 257, 4097, 4824, 38592)


def _need_sm90():
    need_sm90a("the pre-attention op")


def _kernel_names(monkeypatch) -> list:
    """The kernel names the op asks jit.get_kernel for from now on (appended as it runs)."""
    from h3cupy.core import jit

    names = []
    real = jit.get_kernel

    def spy(spec, name, *args, **kwargs):
        names.append(name)
        return real(spec, name, *args, **kwargs)

    monkeypatch.setattr(jit, "get_kernel", spy)
    return names


@pytest.mark.parametrize("m", MS)
def test_bf16_pre_attention(m, rng):
    """Every Ulysses degree P in {1, 2, 4, 8} on the same inputs."""

    _need_sm90()
    results = check_pre_attention_bf16(m, (1, 2, 4, 8), rng)
    assert_passed(results)


@pytest.mark.parametrize("m", (1, 129, 4097, 38592))
def test_bf16_pre_attention_mma_backend(m, rng, monkeypatch):
    """The TMA-fed mma.sync back end (the sm_120a path) run on the H200: the same epilogue with
    the head split over two warps (cross-warp sum of squares and RoPE partners in shared memory).
    """
    from h3cupy.ops import pre_attention

    _need_sm90()
    monkeypatch.setattr(pre_attention, "BACKEND", "mma")
    results = check_pre_attention_bf16(m, (8, 1), rng)
    assert_passed(results)


# NOTE: the tests above run the tail split (gemm.TAIL_SPLIT, on by default): at M = 4824 the
# 128 x 256 tile pairs leave 12 of 1596 for the last round of 66 clusters (4 k-ranges each), at
# M <= 256 the single-CTA 128 x 128 tiles run 168 = 132 + 36 (3 k-ranges each).
@pytest.mark.parametrize("m", (129, 4824))
def test_bf16_pre_attention_no_tail_split(m, rng, monkeypatch):
    """The same checks with the tail split off."""
    from h3cupy.ops import gemm

    _need_sm90()
    monkeypatch.setattr(gemm, "TAIL_SPLIT", False)
    results = check_pre_attention_bf16(m, (1, 8), rng)
    assert_passed(results)


@pytest.mark.parametrize("m", (257, 4824, 38592))
def test_bf16_pre_attention_heads_epilogue(m, rng, monkeypatch):
    """The 128 x 256 tiles' epilogue one head at a time (pre_attention.BF16_EPILOGUE = "heads":
    head 1's math under head 0's store pass), every Ulysses degree."""
    from h3cupy.ops import pre_attention

    _need_sm90()
    monkeypatch.setattr(pre_attention, "BF16_EPILOGUE", "heads")
    results = check_pre_attention_bf16(m, (1, 2, 4, 8), rng)
    assert_passed(results)


# The single-launch form (pre_attention.BF16_FUSED_PROLOGUE): the GEMM launch writes a itself,
# the first round's rows (2048 at these M: 8 M-tile pairs) by the consumer warps, the rest by the
# spare producer warps behind per-tile ready counters; M = 257 has its rows all in the first round.
@pytest.mark.parametrize("epilogue", ("rows", "heads"))
@pytest.mark.parametrize("m", (257, 4097, 4824, 38592))
def test_bf16_pre_attention_fused_prologue(m, epilogue, rng, monkeypatch):
    """The single-launch form against the float64 reference, every Ulysses degree, both
    epilogues (invalid AdaLN indices among the production segments: their rows exactly 0)."""
    from h3cupy.ops import pre_attention

    _need_sm90()
    monkeypatch.setattr(pre_attention, "BF16_FUSED_PROLOGUE", True)
    monkeypatch.setattr(pre_attention, "BF16_EPILOGUE", epilogue)
    results = check_pre_attention_bf16(m, (1, 2, 4, 8), rng)
    assert_passed(results)


@pytest.mark.parametrize("m", (4097, 38592))
def test_bf16_pre_attention_two_launch(m, rng, monkeypatch):
    """The two-launch form (the prologue launch, then the GEMM; the default until session 25)
    against the float64 reference, every Ulysses degree."""
    from h3cupy.ops import pre_attention

    _need_sm90()
    monkeypatch.setattr(pre_attention, "BF16_FUSED_PROLOGUE", False)
    results = check_pre_attention_bf16(m, (1, 2, 4, 8), rng)
    assert_passed(results)


@pytest.mark.parametrize("m", (4097,))
def test_bf16_pre_attention_fused_prologue_int32(m, rng, monkeypatch):
    """The single-launch form with int32 AdaLN indices and random int32 positions."""
    from h3cupy.ops import pre_attention

    _need_sm90()
    monkeypatch.setattr(pre_attention, "BF16_FUSED_PROLOGUE", True)
    results = check_pre_attention_bf16(m, (8,), rng, positions="random", index_dtype=np.int32)
    assert_passed(results)


@pytest.mark.parametrize("m", (4824, 38592))
def test_bf16_pre_attention_fused_prologue_same_bits(m, rng, monkeypatch):
    """The single-launch form gives the two-launch form's bits: in ``out`` and in the workspace
    (a: the prologue's arithmetic and reduction order, invalid-index rows zero), eager twice and
    in a CUDA graph replay; the ready counters are zeroed for every launch (a second eager call
    and the replay would otherwise read stale counters and race ahead of the rows)."""
    import torch

    from h3cupy.ops import pre_attention
    from h3cupy.ops.pre_attention import minimax_h3_bf16_pre_attention as op

    _need_sm90()
    p = 8
    args, out, ws = _torch_args(m, p, rng)
    monkeypatch.setattr(pre_attention, "BF16_FUSED_PROLOGUE", False)  # the two launches
    op(*args, ulysses_degree=p, out=out, workspace=ws)
    want_out, want_ws = out.clone(), ws.clone()
    monkeypatch.setattr(pre_attention, "BF16_FUSED_PROLOGUE", True)

    def same(what):
        torch.cuda.synchronize()
        assert torch.equal(ws.view(torch.int16), want_ws.view(torch.int16)), f"a differs ({what})"
        assert torch.equal(out.view(torch.int16), want_out.view(torch.int16)), f"out ({what})"

    for run in ("eager 1", "eager 2"):
        out.view(torch.uint8).fill_(0xFF)
        ws.view(torch.uint8).fill_(0xFF)
        op(*args, ulysses_degree=p, out=out, workspace=ws)
        same(run)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        op(*args, ulysses_degree=p, out=out, workspace=ws)
    for run in ("replay 1", "replay 2"):
        out.view(torch.uint8).fill_(0xFF)
        ws.view(torch.uint8).fill_(0xFF)
        graph.replay()
        same(run)


def test_bf16_pre_attention_epilogue_setting(rng, monkeypatch):
    """An unknown pre_attention.BF16_EPILOGUE is refused with the forms it accepts."""
    from h3cupy.ops import pre_attention

    _need_sm90()
    monkeypatch.setattr(pre_attention, "BF16_EPILOGUE", "cols")
    with pytest.raises(ValueError, match=r"BF16_EPILOGUE: expected one of \('rows', 'heads'\)"):
        check_pre_attention_bf16(257, (8,), rng)


@pytest.mark.parametrize("index_dtype", (np.int32, np.int64))
@pytest.mark.parametrize("m", (129, 4097))
def test_bf16_pre_attention_positions(m, index_dtype, rng):
    """Explicit positions (int32 / int64, some outside [0, S): clamped on the device) and int32
    AdaLN indices."""

    _need_sm90()
    results = check_pre_attention_bf16(m, (8,), rng, positions="random", index_dtype=index_dtype)
    assert_passed(results)


def _torch_args(m, p, rng):
    from h3cupy.testing import bf16_pre_attention_torch_args

    return bf16_pre_attention_torch_args(m, p, rng)


def test_bf16_pre_attention_graph_and_determinism(rng):
    """torch tensors in, CUDA-graph capture and replay gives the eager bits, and two eager runs
    give the same bits."""
    import torch

    from h3cupy.ops.pre_attention import minimax_h3_bf16_pre_attention as op

    _need_sm90()
    m, p = 4824, 8
    args, out, ws = _torch_args(m, p, rng)
    op(*args, ulysses_degree=p, out=out, workspace=ws)
    first = out.clone()
    out.view(torch.uint8).fill_(0xFF)
    op(*args, ulysses_degree=p, out=out, workspace=ws)
    assert torch.equal(out.view(torch.int16), first.view(torch.int16)), "not deterministic"
    out.view(torch.uint8).fill_(0xFF)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        op(*args, ulysses_degree=p, out=out, workspace=ws)
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(out.view(torch.int16), first.view(torch.int16)), "graph replay differs"


def test_bf16_pre_attention_errors(rng):
    import torch

    from h3cupy.ops.pre_attention import minimax_h3_bf16_pre_attention as op

    _need_sm90()
    m, p = 129, 2
    args, out, ws = _torch_args(m, p, rng)
    with pytest.raises(ValueError, match=r"ulysses_degree: expected one of"):
        op(*args, ulysses_degree=3, out=out)
    with pytest.raises(ValueError, match=r"out: expected shape \[2, 129, 28, 3, 128\]"):
        op(*args, ulysses_degree=p, out=out[:, :128])
    with pytest.raises(ValueError, match=r"qkv_weight: expected shape \[21504, 5376\]"):
        op(*args[:5], args[5][:128], *args[6:], ulysses_degree=p, out=out)
    with pytest.raises(TypeError, match=r"rope_cos_sin: expected dtype bf16"):
        op(*args[:8], args[8].float(), ulysses_degree=p, out=out)
    with pytest.raises(ValueError, match=r"identity positions .* need S >= M"):
        op(*args[:8], args[8][:100], ulysses_degree=p, out=out)
    with pytest.raises(ValueError, match=r"rope_positions: expected shape \[129\]"):
        pos = torch.zeros(128, dtype=torch.int64, device="cuda")
        op(*args, ulysses_degree=p, out=out, rope_positions=pos)
    with pytest.raises(ValueError, match=r"qk_eps: expected a positive finite"):
        op(*args, ulysses_degree=p, out=out, qk_eps=-1.0)
    with pytest.raises(ValueError, match=r"workspace: expected shape \[129, 5376\]"):
        op(*args, ulysses_degree=p, out=out, workspace=ws[:64])


@pytest.mark.parametrize("out_mode", ("bf16", "e4m3", "nvfp4"))
@pytest.mark.parametrize("m", (1, 129, 257, 4097, 4824))
def test_fp8_pre_attention(m, out_mode, rng):
    """minimax_h3_fp8_pre_attention (W8A8) in every out_mode against the reference consuming the
    kernel's own act_q / act_scale; bounds in h3cupy.verify.check_pre_attention_fp8 (SPEC §8).
    Above M = 256 this runs the default 128 x 192 tiles in N-tile pairs (pre_attention.FP8_TILE
    = "n192"): each sampled row is checked across all 168 heads, so each head position in a pair
    (whole in the first tile, straddling both through the stash, whole in the second) is covered
    in every kind; M = 257 and 4097 leave a 1-row last M-tile."""

    _need_sm90()
    results = check_pre_attention_fp8(m, out_mode, rng)
    assert_passed(results)


@pytest.mark.parametrize("out_mode", ("bf16", "e4m3", "nvfp4"))
@pytest.mark.parametrize("m", (257, 385, 4097))
def test_fp8_pre_attention_tile_m128(m, out_mode, rng, monkeypatch):
    """The FP8 op on 128 x 128 tiles in clusters of two (pre_attention.FP8_TILE = "m128"; the
    default, tested above, is "n192": 128 x 192 tiles in N-tile pairs), same checks; M = 257
    leaves the second tile of a pair with one row, 385 a pair whose second tile has one row,
    4097 a lone last tile."""
    from h3cupy.ops import pre_attention

    _need_sm90()
    monkeypatch.setattr(pre_attention, "FP8_TILE", "m128")
    results = check_pre_attention_fp8(m, out_mode, rng)
    assert_passed(results)


@pytest.mark.parametrize("cluster", (1, 2))
@pytest.mark.parametrize("out_mode", ("bf16", "e4m3", "nvfp4"))
@pytest.mark.parametrize("m", (257, 4097, 4824))
def test_fp8_pre_attention_tile_m192(m, out_mode, cluster, rng, monkeypatch):
    """The FP8 op on 192 x 128 tiles (pre_attention.FP8_TILE = "m192": three consumer
    warpgroups, one head each for 64 rows) on single CTAs and in clusters of two
    (gemm.FP8_CLUSTER), same checks; M = 257 a lone 65-row last tile, 4097 one row past a
    whole tile, 4824 the production centre (a 24-row last tile)."""
    from h3cupy.ops import gemm, pre_attention

    _need_sm90()
    monkeypatch.setattr(pre_attention, "FP8_TILE", "m192")
    monkeypatch.setattr(gemm, "FP8_CLUSTER", cluster)
    results = check_pre_attention_fp8(m, out_mode, rng)
    assert_passed(results)


@pytest.mark.parametrize("tile, m", (("m128", 129), ("m128", 4097), ("m192", 4097), ("m192", 4824)))
def test_fp8_pre_attention_no_tail_split(tile, m, rng, monkeypatch):
    """The FP8 op with the tail split off (gemm.TAIL_SPLIT; the default "n192" pairs are built
    without one): the two-warpgroup kernels (single CTAs at M = 129, "m128" pairs at 4097, where
    the tests above split 36 / 18 leftover tiles into 3 k-ranges) and the 192-row ones (at
    M = 4824 26 x 168 = 4368 tiles = 33 x 132 + 12, the 12 split into 4 k-ranges above)."""
    from h3cupy.ops import gemm, pre_attention

    _need_sm90()
    monkeypatch.setattr(pre_attention, "FP8_TILE", tile)
    monkeypatch.setattr(gemm, "TAIL_SPLIT", False)
    results = check_pre_attention_fp8(m, "bf16", rng)
    assert_passed(results)


# The n192 pairs' tail split (pre_attention.FP8_PAIR_TAIL_SPLIT): the last R pairs of the tile
# order run in S k-ranges (tests/test_launch.py mirrors the decode). Where they fall, on 132 CTAs
# (groups of 8 M-tiles, the M index cycling fastest): M = 2100, 17 M-tiles x 56 = 952 pairs =
# 7 x 132 + 28, the last 28 pairs of the lone last M-tile (rows 2048-2099, K heads 28-55 and V),
# 4 k-ranges; M = 4824, 16 pairs of M-tiles 32-37 (rows 4096-4823, V heads), 4 k-ranges; M = 5200,
# 41 x 56 = 2296 = 17 x 132 + 52, pairs 4-55 of M-tile 40 (rows 5120-5199: Q, K and V), 2
# k-ranges. The rows of those tiles are checked beside the random sample.
_PAIR_TAIL_ROWS = {2100: (2048, 1), 4824: (4096, 9), 5200: (5120, 1)}


@pytest.mark.parametrize("out_mode", ("bf16", "e4m3", "nvfp4"))
@pytest.mark.parametrize("m", sorted(_PAIR_TAIL_ROWS))
def test_fp8_pre_attention_pair_tail_split(m, out_mode, rng, monkeypatch):
    """The default "n192" pairs with their tail split (kernel pre_attention_fp8_n192_tail_sm90):
    each head position of a pair (whole in a tile, straddling both through the stash) in the
    split pairs, whose two epilogues one warpgroup runs after summing the k-ranges' partials."""
    from h3cupy.ops import pre_attention

    _need_sm90()
    monkeypatch.setattr(pre_attention, "FP8_PAIR_TAIL_SPLIT", True)
    lo, step = _PAIR_TAIL_ROWS[m]
    results = check_pre_attention_fp8(m, out_mode, rng, extra_rows=np.arange(lo, m, step))
    assert_passed(results)


@pytest.mark.parametrize("m", (2100, 5200))
def test_fp8_pre_attention_pair_tail_split_graph(m, rng, monkeypatch):
    """The split pairs with every output, workspace and device scalar supplied: a second eager
    run and a CUDA-graph replay give the first run's bytes (the partials are summed in split
    order, whichever k-range arrives last; the counters reset themselves and are zeroed per
    launch)."""
    from h3cupy.ops import pre_attention

    _need_sm90()
    monkeypatch.setattr(pre_attention, "FP8_PAIR_TAIL_SPLIT", True)
    lo, step = _PAIR_TAIL_ROWS[m]
    results = check_pre_attention_fp8(m, "bf16", rng, graph=True, extra_rows=np.arange(lo, m, step))
    assert_passed(results)


def test_fp8_pre_attention_pair_tail_split_elsewhere_same_bits(rng, monkeypatch):
    """Outside the split pairs the _tail kernel gives the unsplit kernel's bits (the same
    mainloop and epilogue on every whole pair), and inside them it differs from it at most in
    the last bits of the sums: at M = 5200 the split pairs are columns 4 x 384 .. of rows
    5120-5199, so every row below 5120 is bitwise the unsplit one."""
    from h3cupy.ops import pre_attention
    from h3cupy.testing import download
    from h3cupy.verify import fp8_pre_attention_runner

    _need_sm90()
    m = 5200
    *_, op = fp8_pre_attention_runner(m, "bf16", rng)

    def run():
        return [download(t).view(np.uint16) for t in op()[:3]]

    base = run()
    monkeypatch.setattr(pre_attention, "FP8_PAIR_TAIL_SPLIT", True)
    split = run()
    for name, a, b in zip("qkv", base, split, strict=True):
        assert np.array_equal(a[:5120], b[:5120]), f"{name}: rows below the split pairs differ"
        # columns 0 .. 4 x 384 of the last M-tile are whole pairs: bitwise equal too
        flat_a, flat_b = a[5120:].reshape(80, -1), b[5120:].reshape(80, -1)
        kind_col0 = "qkv".index(name) * 7168
        whole_cols = max(0, 4 * 384 - kind_col0)
        assert np.array_equal(flat_a[:, :whole_cols], flat_b[:, :whole_cols]), name


# The FP8 single launch (pre_attention.FP8_FUSED_PROLOGUE, the "n192" pairs): the GEMM launch
# writes act_q and act_scale itself, the first round's rows (1024: 8 M-tiles) by the consumer
# warps, the rest by the spare producer warps in three passes per row; M = 257 has every row in
# the first round, 4097 / 4824 the rest in the spare warps (int32 indices, some invalid).
@pytest.mark.parametrize("out_mode", ("bf16", "e4m3", "nvfp4"))
@pytest.mark.parametrize("m", (257, 4097, 4824))
def test_fp8_pre_attention_fused_prologue(m, out_mode, rng, monkeypatch):
    """The single launch against the reference consuming its own act_q / act_scale (SPEC §8),
    every out mode; at M = 4824 also a second eager run and a CUDA-graph replay, bytewise."""
    from h3cupy.ops import pre_attention

    _need_sm90()
    monkeypatch.setattr(pre_attention, "FP8_FUSED_PROLOGUE", True)
    results = check_pre_attention_fp8(m, out_mode, rng, graph=m == 4824)
    assert_passed(results)


@pytest.mark.parametrize("m", (4824, 9648))
def test_fp8_pre_attention_fused_prologue_same_bits(m, rng, monkeypatch):
    """The single launch's act_q, act_scale and q / k / v have the two launches' bytes (the
    prologue kernel's arithmetic, reduction order and quantization; invalid indices give zero
    rows with s = RN(1e-12 / 448)), eager twice."""
    from h3cupy.ops import pre_attention
    from h3cupy.testing import download, poison
    from h3cupy.verify import fp8_pre_attention_runner

    _need_sm90()
    *_, act_q, act_scale, op = fp8_pre_attention_runner(m, "bf16", rng)

    def run():
        poison(act_q, act_scale)
        res = op()
        return [download(t).view(np.uint16) for t in res[:3]] + [
            download(act_q),
            download(act_scale).view(np.uint32),
        ]

    monkeypatch.setattr(pre_attention, "FP8_FUSED_PROLOGUE", False)
    want = run()  # the two launches
    monkeypatch.setattr(pre_attention, "FP8_FUSED_PROLOGUE", True)
    for attempt in ("eager 1", "eager 2"):
        got = run()
        for name, a, b in zip(("q", "k", "v", "act_q", "act_scale"), want, got, strict=True):
            assert np.array_equal(a, b), f"{name} differs ({attempt})"


# The single launch in clusters of two (pre_attention.FP8_PAIR_CLUSTER = 2 below
# FP8_PAIR_CLUSTER2_FROM_M, the default from there): both CTAs of a cluster run the same pairs on
# vertically adjacent M-tiles and multicast the weight tiles; M = 257 (3 M-tiles) and 4097 (33)
# leave the last cluster's second tile entirely past M.
@pytest.mark.parametrize("out_mode", ("bf16", "e4m3", "nvfp4"))
@pytest.mark.parametrize("m", (257, 4097, 4824))
def test_fp8_pre_attention_pair_cluster(m, out_mode, rng, monkeypatch):
    """The clustered single launch against the reference consuming its own act_q / act_scale
    (SPEC §8), every out mode; at M = 4824 also a second eager run and a CUDA-graph replay,
    bytewise."""
    from h3cupy.ops import pre_attention

    _need_sm90()
    monkeypatch.setattr(pre_attention, "FP8_PAIR_CLUSTER", 2)
    results = check_pre_attention_fp8(m, out_mode, rng, graph=m == 4824)
    assert_passed(results)


@pytest.mark.parametrize("m", (4097, 38592))
def test_fp8_pre_attention_pair_cluster_same_bits(m, rng, monkeypatch):
    """Clusters of two change where the operands come from, not the arithmetic: act_q,
    act_scale and q / k / v have the single CTAs' bytes (the kernel the op asks for is checked
    too). At M = 38592 the clusters are the default's (FP8_PAIR_CLUSTER2_FROM_M), and the single
    CTAs are asked for with the threshold off."""
    import cupy

    from h3cupy.ops import pre_attention
    from h3cupy.testing import download, poison
    from h3cupy.verify import fp8_pre_attention_runner

    _need_sm90()
    *_, act_q, act_scale, op = fp8_pre_attention_runner(m, "bf16", rng)
    names = _kernel_names(monkeypatch)
    outs = {n: cupy.empty_like(t) for n, t in zip("qkv", op()[:3], strict=True)}

    def run():
        poison(act_q, act_scale, *outs.values())
        res = op(**outs)
        return [download(t).view(np.uint16) for t in res[:3]] + [
            download(act_q),
            download(act_scale).view(np.uint32),
        ]

    default = pre_attention.FP8_PAIR_CLUSTER2_FROM_M
    assert pre_attention.fp8_pair_cluster(m) == (2 if m >= default else 1)
    monkeypatch.setattr(pre_attention, "FP8_PAIR_CLUSTER2_FROM_M", None)
    names.clear()
    want = run()  # single CTAs
    assert any("n192_fused_sm90" in n for n in names), names
    names.clear()
    if m >= default:  # the default's clusters
        monkeypatch.setattr(pre_attention, "FP8_PAIR_CLUSTER2_FROM_M", default)
    else:
        monkeypatch.setattr(pre_attention, "FP8_PAIR_CLUSTER", 2)
    got = run()
    assert any("n192_fused_x2_sm90" in n for n in names), names
    for name, a, b in zip(("q", "k", "v", "act_q", "act_scale"), want, got, strict=True):
        assert np.array_equal(a, b), f"{name} differs"
    monkeypatch.setattr(pre_attention, "FP8_PAIR_CLUSTER", 3)
    with pytest.raises(ValueError, match=r"FP8_PAIR_CLUSTER: expected 1 or 2, got 3"):
        op()


def test_fp8_pre_attention_tail_kernel_one_range_same_bits(rng, monkeypatch):
    """The diagnostic pre_attention.FP8_PAIR_TAIL_KERNEL (the tail-split kernel with one k-range
    per pair, no split): within SPEC §8 of the reference on rows of every M-tile, and the two
    launches' bytes exactly, q / k / v poisoned before each run, at M = 4824 (16 pairs left for
    a last round, where the split would engage)."""
    from h3cupy.ops import pre_attention
    from h3cupy.testing import poisoned_bf16_run
    from h3cupy.verify import fp8_pre_attention_runner

    _need_sm90()
    m = 4824
    monkeypatch.setattr(pre_attention, "FP8_FUSED_PROLOGUE", False)
    monkeypatch.setattr(pre_attention, "FP8_PAIR_TAIL_KERNEL", True)
    names = _kernel_names(monkeypatch)
    # Against the reference (the SPEC §8 FP8-op bound, in check_pre_attention_fp8): the sampled
    # rows plus every 31st row, so each 128-row M-tile, the last round's pairs included, is read.
    results = check_pre_attention_fp8(m, "bf16", rng, extra_rows=np.arange(0, m, 31))
    assert any("pre_attention_fp8_n192_tail_sm90" in n for n in names), names
    assert_passed(results)

    *_, op = fp8_pre_attention_runner(m, "bf16", rng)
    q, k, v = op()[:3]  # caller-owned outputs, poisoned before each run below
    tail, written = poisoned_bf16_run(lambda: op(q=q, k=k, v=v), (q, k, v))
    assert written, "the tail kernel left poisoned (unwritten) elements"
    monkeypatch.setattr(pre_attention, "FP8_PAIR_TAIL_KERNEL", False)
    names.clear()
    base, written = poisoned_bf16_run(lambda: op(q=q, k=k, v=v), (q, k, v))
    assert written, "the two launches left poisoned (unwritten) elements"
    assert not any("_tail" in n for n in names), names
    for name, a, b in zip("qkv", base, tail, strict=True):
        assert np.array_equal(a, b), f"{name}: the tail kernel with one range differs"


def test_fp8_pre_attention_tail_split_takes_two_launches(rng, monkeypatch):
    """With the pairs' tail split (pre_attention.FP8_PAIR_TAIL_SPLIT) the op takes the two
    launches even under FP8_FUSED_PROLOGUE (the single launch has no tail split): the prologue
    kernel is fetched and the single-launch kernel is not; without it, the single-launch kernel
    is. Checked by the kernels the op asks for, not by bytes."""
    from h3cupy.ops import pre_attention
    from h3cupy.verify import fp8_pre_attention_runner

    _need_sm90()
    *_, op = fp8_pre_attention_runner(4824, "bf16", rng)
    names = _kernel_names(monkeypatch)
    monkeypatch.setattr(pre_attention, "FP8_FUSED_PROLOGUE", True)
    monkeypatch.setattr(pre_attention, "FP8_PAIR_TAIL_SPLIT", True)
    op()
    assert any("prologue" in n for n in names), names
    assert not any("_fused" in n for n in names), names
    monkeypatch.setattr(pre_attention, "FP8_PAIR_TAIL_SPLIT", False)
    names.clear()
    op()
    assert any("pre_attention_fp8_n192_fused" in n for n in names), names


def test_fp8_pre_attention_tile_setting(rng, monkeypatch):
    """An unknown pre_attention.FP8_TILE is refused with the forms it accepts."""
    from h3cupy.ops import pre_attention

    _need_sm90()
    monkeypatch.setattr(pre_attention, "FP8_TILE", "n256")
    with pytest.raises(ValueError, match=r"FP8_TILE: expected one of \('n192', 'm192', 'm128'\)"):
        check_pre_attention_fp8(257, "bf16", rng)


@pytest.mark.parametrize("out_mode", ("bf16", "e4m3", "nvfp4"))
@pytest.mark.parametrize("m", (1, 129, 4097))
def test_fp8_pre_attention_mma_backend(m, out_mode, rng, monkeypatch):
    """The FP8 op on the TMA-fed mma.sync back end (the sm_120a path; on the H200 the legacy
    e4m3 form, run as f16 MMAs), same checks (issue #5: both back ends)."""
    from h3cupy.ops import pre_attention

    _need_sm90()
    monkeypatch.setattr(pre_attention, "BACKEND", "mma")
    results = check_pre_attention_fp8(m, out_mode, rng)
    assert_passed(results)


@pytest.mark.parametrize("backend", ("wgmma", "mma"))
@pytest.mark.parametrize("out_mode", ("bf16", "e4m3", "nvfp4"))
def test_fp8_pre_attention_graph(out_mode, backend, rng, monkeypatch):
    """Every output, workspace and device scalar supplied: a second eager run and a CUDA-graph
    replay (captured on a fresh stream: no allocation, no host sync) give the first run's bytes."""
    from h3cupy.ops import pre_attention

    _need_sm90()
    monkeypatch.setattr(pre_attention, "BACKEND", backend)
    results = check_pre_attention_fp8(257, out_mode, rng, graph=True)
    assert_passed(results)


def test_fp8_pre_attention_errors(rng):
    import cupy

    from h3cupy.ops.pre_attention import minimax_h3_fp8_pre_attention as op

    _need_sm90()
    args, out, ws = _torch_args(129, 1, rng)
    wq = cupy.zeros((21504, 5376), np.uint8)
    wsc = cupy.ones((21504,), np.float32)
    base = (*args[:5], wq, wsc, *args[6:])
    with pytest.raises(ValueError, match=r"q_descale: required when out_mode='e4m3'"):
        op(*base, out_mode="e4m3")
    with pytest.raises(ValueError, match=r"out_mode: expected one of"):
        op(*base, out_mode="fp16")
    with pytest.raises(ValueError, match=r"qkv_weight_scale: expected shape \[21504\]"):
        op(*base[:6], wsc[:100], *base[7:])
    with pytest.raises(ValueError, match=r"k_global_scale: expected a positive finite scale"):
        op(*base, out_mode="nvfp4", q_global_scale=1.0, k_global_scale=-2.0, v_global_scale=1.0)


@pytest.mark.parametrize("out_mode", ("bf16", "e4m3", "nvfp4"))
@pytest.mark.parametrize("m", (1, 129, 4097))
def test_nvfp4_pre_attention(m, out_mode, rng, monkeypatch):
    """minimax_h3_nvfp4_pre_attention on the mma.sync back end (W4A4: the block-scaled MMA on
    sm_120a; on the H200 its exact bf16 emulation) in every out_mode against the reference
    consuming its own act_q / act_sf."""
    from h3cupy.core import arch
    from h3cupy.ops import pre_attention

    if arch.current_target() not in ("sm_90a", "sm_120a"):
        pytest.skip("the NVFP4 pre-attention op runs on sm_90a and sm_120a")
    monkeypatch.setattr(pre_attention, "BACKEND", "mma")
    results = check_pre_attention_nvfp4(m, out_mode, rng)
    assert_passed(results)


@pytest.mark.parametrize("out_mode", ("bf16", "e4m3", "nvfp4"))
@pytest.mark.parametrize("m", (1, 129, 4097))
def test_nvfp4_pre_attention_hopper_path(m, out_mode, rng, monkeypatch):
    """The NVFP4 op's Hopper path (BACKEND = "wgmma": operands dequantized to exact bf16, the
    bf16 engine, y = bf16(acc * alpha)), same checks."""
    from h3cupy.ops import pre_attention

    _need_sm90()
    monkeypatch.setattr(pre_attention, "BACKEND", "wgmma")
    results = check_pre_attention_nvfp4(m, out_mode, rng)
    assert_passed(results)


@pytest.mark.parametrize("swizzled", (False, True))
def test_nvfp4_dequantize_bf16(swizzled, rng):
    """a' = e2m1 * ue4m3 scale (the Hopper NVFP4 path's operands) bit-exact to the host decode,
    from linear and from 128x4-swizzled scales; the output poisoned first."""
    import cupy

    from h3cupy import formats
    from h3cupy.core import interop
    from h3cupy.ops.gemm import nvfp4_dequantize_bf16
    from h3cupy.testing import download, poison

    _need_sm90()
    r, k = 300, 5376
    a = (rng.standard_normal((r, k)) * rng.uniform(0.01, 30.0, (r, 1))).astype(formats.BF16)
    codes, sf = formats.nvfp4_quantize(a, formats.nvfp4_global_scale_from_amax(np.abs(a).max()))
    want = formats.e2m1_decode(formats.unpack_e2m1(codes)) * np.repeat(
        formats.ue4m3_decode(sf), 16, axis=-1
    )
    out = cupy.empty((r, k), formats.BF16)
    poison(out)
    sf_dev = formats.swizzle_sf_128x4(sf) if swizzled else sf
    t = [interop.as_tensor(cupy.asarray(v), n) for v, n in ((codes, "q"), (sf_dev, "sf"))]
    nvfp4_dequantize_bf16(t[0], t[1], interop.as_tensor(out, "out"), swizzled=swizzled)
    got = download(out).astype(np.float32)
    np.testing.assert_array_equal(got, want.astype(np.float32))  # exact: 2-bit x 4-bit products


@pytest.mark.parametrize("backend", ("mma", "wgmma"))
@pytest.mark.parametrize("out_mode", ("e4m3", "nvfp4"))
def test_nvfp4_pre_attention_graph(out_mode, backend, rng, monkeypatch):
    """As test_fp8_pre_attention_graph for the NVFP4 op (alpha formed on the device from the
    device act_global_scale), on the emulation and on the Hopper path (the sm_90a default)."""
    from h3cupy.ops import pre_attention

    _need_sm90()
    monkeypatch.setattr(pre_attention, "BACKEND", backend)
    results = check_pre_attention_nvfp4(257, out_mode, rng, graph=True)
    assert_passed(results)
