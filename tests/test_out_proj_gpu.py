"""GPU: minimax_h3_fp8_out_proj against the reference (SPEC §5, bounds §8): act_q / act_scale
bit-exact to the host per-token FP8; out within 1e-2 + 1e-2*mag + 2*ulp_bf16(mag) with mag =
max(|ref|, |gate*o|) (the product can cancel the residual); invalid-index rows (-1, rows, 2^31-1
planted) equal residual exactly; out aliasing residual. Outputs and workspaces NaN-poisoned."""

from __future__ import annotations

import numpy as np
import pytest

from h3cupy.testing import need_sm90a
from h3cupy.verify import (  # at module level: a missing name fails collection on CPU too
    check_out_proj_fp8,
    check_out_proj_nvfp4,
)

pytestmark = pytest.mark.gpu


def _need_sm90():
    need_sm90a("the out_proj ops")


@pytest.mark.parametrize("index_dtype", (np.int32, np.int64))
@pytest.mark.parametrize("m", (1, 127, 129, 4097, 4824, 38592))
def test_fp8_out_proj(m, index_dtype, rng):

    _need_sm90()
    results = check_out_proj_fp8(m, rng, index_dtype=index_dtype)
    bad = [r.row() for r in results if not r.passed]
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("m", (129, 4824))
def test_fp8_out_proj_aliasing_residual(m, rng):

    _need_sm90()
    results = check_out_proj_fp8(m, rng, alias=True)
    bad = [r.row() for r in results if not r.passed]
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("fused", (True, False), ids=("fused", "two-launch"))
def test_fp8_out_proj_nan_rows(fused, rng, monkeypatch):
    """A row of attn_out holding a NaN (either sign) quantizes as the host's per-token FP8 does:
    np.max propagates the NaN, so the row's scale is NaN and every code of it a NaN code (e4m3
    0x7f, or 0xff: the sign bit is the element's); every other row stays bit-exact. Rows 5 (the
    consumer warps' first round) and 4000 (the spare warps) of M = 4824 in the single-launch
    form; both through quantize.cu's per-row kernel in the two-launch form."""
    import cupy

    from h3cupy import formats
    from h3cupy.ops import out_proj
    from h3cupy.ops.out_proj import minimax_h3_fp8_out_proj
    from h3cupy.reference import inputs as ref_inputs
    from h3cupy.testing import assert_fp8_nan_rows, download, upload

    _need_sm90()
    monkeypatch.setattr(out_proj, "FUSED_QUANT", fused)
    m = 4824
    host = ref_inputs.out_proj_inputs(m, rows=9, rng=rng)
    a = host["attn_out"]
    a.view(np.uint16)[5, 100] = 0x7FC0  # +NaN
    a.view(np.uint16)[4000, 7000] = 0xFFC1  # -NaN
    wq, wsc = formats.fp8_quantize_per_channel(host["o_weight"])
    # filled with non-NaN values: the NaN poison would pass the NaN rows' checks unwritten
    act_q = cupy.full((m, 7168), 0x11, np.uint8)
    act_scale = cupy.full((m,), -1.0, np.float32)
    minimax_h3_fp8_out_proj(
        upload(a),
        cupy.asarray(wq),
        cupy.asarray(wsc),
        upload(host["gate"]),
        upload(host["gate_index"]),
        upload(host["residual"]),
        act_q=act_q,
        act_scale=act_scale,
    )
    assert_fp8_nan_rows(download(act_q), download(act_scale), a, [5, 4000])


def _error_path_inputs(m: int):
    """attn_out, o_weight_q, o_weight_scale, gate, gate_index, residual of the right shapes for
    the tests of refused calls (their values are never used)."""
    import cupy

    from h3cupy import formats

    return (
        cupy.zeros((m, 7168), formats.BF16),
        cupy.zeros((5376, 7168), np.uint8),
        cupy.ones((5376,), np.float32),
        cupy.zeros((9, 5376), formats.BF16),
        cupy.zeros((m,), np.int32),
        cupy.zeros((m, 5376), formats.BF16),
    )


def _device_args(m: int, rng):
    """attn_out, o_weight_q, o_weight_scale, gate, gate_index, residual on the device: fresh
    random inputs in the model's ranges (reference/inputs.py), the weight quantized per channel."""
    import cupy

    from h3cupy import formats
    from h3cupy.reference import inputs as ref_inputs
    from h3cupy.testing import upload

    host = ref_inputs.out_proj_inputs(m, rows=9, rng=rng)
    wq, wsc = formats.fp8_quantize_per_channel(host["o_weight"])
    dev = {k: upload(host[k]) for k in ("attn_out", "gate", "gate_index", "residual")}
    return (
        dev["attn_out"],
        cupy.asarray(wq),
        cupy.asarray(wsc),
        dev["gate"],
        dev["gate_index"],
        dev["residual"],
    )


def test_fp8_out_proj_errors(rng):
    import cupy

    from h3cupy.ops.out_proj import minimax_h3_fp8_out_proj as op

    _need_sm90()
    m = 64
    a, wq, ws, gate, idx, res = _error_path_inputs(m)
    with pytest.raises(ValueError, match=r"attn_out: expected shape \[\*, 7168\]"):
        op(a[:, :7000], wq, ws, gate, idx, res)
    with pytest.raises(TypeError, match=r"gate_index: expected dtype int32 or int64"):
        op(a, wq, ws, gate, idx.astype(np.float32), res)
    with pytest.raises(ValueError, match=r"residual: expected shape \[64, 5376\]"):
        op(a, wq, ws, gate, idx, res[:32])
    with pytest.raises(ValueError, match=r"o_weight_scale: expected shape \[5376\]"):
        op(a, wq, ws[:10], gate, idx, res)
    # shorter than minimax_h3_fp8_out_proj_flags(M) (the plan's ready counters and tail split)
    with pytest.raises(ValueError, match=r"workspace_flags: expected at least \d+ int32"):
        op(a, wq, ws, gate, idx, res, workspace_flags=cupy.zeros((0,), np.int32))


@pytest.mark.parametrize("m", (1, 129, 4824, 38592))
def test_fp8_out_proj_two_launch(m, rng, monkeypatch):
    """The two-launch form (FUSED_QUANT = False: the per-token FP8 of attn_out as a launch of its
    own; the tests above run the default single-launch form); same checks."""
    from h3cupy.ops import out_proj

    _need_sm90()
    monkeypatch.setattr(out_proj, "FUSED_QUANT", False)
    results = check_out_proj_fp8(m, rng)
    bad = [r.row() for r in results if not r.passed]
    assert not bad, "\n".join(bad)


# NOTE: the tail split's cases (gemm.TAIL_SPLIT, on by default): M = 1 runs 42 single-CTA tiles as 3
# k-ranges each (126 units), M = 4097 leaves 14 of 476 tile pairs for the last round (4 k-ranges
# each), M = 4824 4 of 532; each against the same call with the split off.
@pytest.mark.parametrize("split", (True, False))
@pytest.mark.parametrize("fused", (True, False))
@pytest.mark.parametrize("m", (1, 4097, 4824))
def test_fp8_out_proj_tail_split(m, fused, split, rng, monkeypatch):
    """TAIL_SPLIT on and off: the last partial round's tiles as split-K units summed by the last
    to finish, or whole; same checks, with more reference rows so that the split tiles' rows are
    well sampled."""
    from h3cupy.ops import gemm, out_proj

    _need_sm90()
    monkeypatch.setattr(gemm, "TAIL_SPLIT", split)
    monkeypatch.setattr(out_proj, "FUSED_QUANT", fused)
    results = check_out_proj_fp8(m, rng, max_ref_rows=400)
    bad = [r.row() for r in results if not r.passed]
    assert not bad, "\n".join(bad)


# NOTE: gemm.FP8_CLUSTER's other setting (the tests above run the default, 1: the 128 x 192 tiles
# on single CTAs, at M = 4824 1064 tiles = 8 rounds of 132 and 8 left, split into 4 k-ranges): 2,
# clusters of two multicasting the weight tile (532 pairs = 8 x 66 + 4). (At M = 38592 the tests
# above run clusters of two: gemm.FP8_OPS_CLUSTER2_FROM_M.)
@pytest.mark.parametrize("fused", (True, False))
@pytest.mark.parametrize("m", (257, 4097, 4824))
def test_fp8_out_proj_other_cluster(m, fused, rng, monkeypatch):
    """The FP8 out_proj with the other gemm.FP8_CLUSTER, both forms; same checks."""
    from h3cupy.ops import gemm, out_proj

    _need_sm90()
    monkeypatch.setattr(gemm, "FP8_CLUSTER", 3 - gemm.FP8_CLUSTER)
    monkeypatch.setattr(out_proj, "FUSED_QUANT", fused)
    results = check_out_proj_fp8(m, rng, max_ref_rows=400)
    bad = [r.row() for r in results if not r.passed]
    assert not bad, "\n".join(bad)


def test_fp8_out_proj_tail_split_deterministic(rng, monkeypatch):
    """TAIL_SPLIT gives the same bytes run to run (the partials are summed in split order, whichever
    unit arrives last), and its counters are back at zero after each launch (else the next launch
    would pick a different last arrival and skip epilogues: poisoned outputs would remain)."""
    import cupy

    from h3cupy import formats
    from h3cupy.ops import gemm, out_proj
    from h3cupy.testing import poison

    _need_sm90()
    monkeypatch.setattr(gemm, "TAIL_SPLIT", True)
    m = 4824
    args = _device_args(m, rng)
    outs = []
    for _ in range(3):
        out = cupy.empty((m, 5376), formats.BF16)
        poison(out)
        out_proj.minimax_h3_fp8_out_proj(*args, out=out)
        outs.append(out.view(np.uint16).get())
    assert np.array_equal(outs[0], outs[1]) and np.array_equal(outs[0], outs[2])


@pytest.mark.parametrize("fused", (True, False))
def test_fp8_out_proj_capture_own_scratch(fused, rng, monkeypatch):
    """Without workspace_flags, calls captured into CUDA graphs (global capture mode, as
    torch.cuda.graph's default, on a stream the op never ran on) use scratch of their capture's
    own: two graphs replayed at once on two streams, while an eager call runs on a third, all give
    the eager call's bytes (M = 4824: the tail split and the single-launch form's counters both
    live in that scratch). The scratch is allocated inside the capture under relaxed mode."""
    import cupy

    from h3cupy import formats
    from h3cupy.core import workspace
    from h3cupy.ops import out_proj
    from h3cupy.testing import poison

    _need_sm90()
    monkeypatch.setattr(out_proj, "FUSED_QUANT", fused)
    m = 4824
    args = _device_args(m, rng)
    outs = [cupy.empty((m, 5376), formats.BF16) for _ in range(3)]
    aqs = [cupy.empty((m, 7168), np.uint8) for _ in range(3)]
    scs = [cupy.empty((m,), np.float32) for _ in range(3)]

    def call(i):
        out_proj.minimax_h3_fp8_out_proj(*args, out=outs[i], act_q=aqs[i], act_scale=scs[i])

    call(0)
    cupy.cuda.Device().synchronize()
    want = outs[0].view(np.uint16).get()
    plan = out_proj.plan_fp8_gemm_wgmma(m, 7168, fused, cupy.cuda.Device().id)
    assert plan.tail.splits > 1  # the case this test is for
    graphs, streams = [], [cupy.cuda.Stream(non_blocking=True) for _ in range(3)]
    for i in (1, 2):
        before = workspace.captured_bytes()
        with streams[i]:
            streams[i].begin_capture(mode=cupy.cuda.runtime.streamCaptureModeGlobal)
            try:
                call(i)
            finally:
                graphs.append(streams[i].end_capture())
        assert workspace.captured_bytes() - before >= 4 * plan.tail.words  # the capture's own
    poison(*outs)
    cupy.cuda.Device().synchronize()
    for i in (1, 2):
        graphs[i - 1].launch(streams[i])
    with streams[0]:
        call(0)
    cupy.cuda.Device().synchronize()
    for i in range(3):
        got = outs[i].view(np.uint16).get()
        assert np.array_equal(got, want), f"out {i}: {int((got != want).sum())} bytes differ"


@pytest.mark.parametrize("m", (1, 129, 4097))
def test_nvfp4_out_proj(m, rng, monkeypatch):
    """W4A4 out_proj on the mma.sync back end (the block-scaled MMA on sm_120a; on the H200 its
    exact bf16 emulation)."""
    from h3cupy.core import arch
    from h3cupy.ops import out_proj

    if arch.current_target() not in ("sm_90a", "sm_120a"):
        pytest.skip("the NVFP4 out_proj runs on sm_90a and sm_120a")
    monkeypatch.setattr(out_proj, "BACKEND", "mma")
    results = check_out_proj_nvfp4(m, rng)
    bad = [r.row() for r in results if not r.passed]
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("m", (1, 129, 4097))
def test_fp8_out_proj_mma_backend(m, rng, monkeypatch):
    """The FP8 op on the TMA-fed mma.sync back end (its sm_120a path; on the H200 the legacy e4m3
    form as f16 MMAs), same checks, int64 indices and the aliased form included."""
    from h3cupy.ops import out_proj

    _need_sm90()
    monkeypatch.setattr(out_proj, "BACKEND", "mma")
    results = check_out_proj_fp8(m, rng, index_dtype=np.int64)
    results += check_out_proj_fp8(m, rng, alias=True)
    bad = [r.row() for r in results if not r.passed]
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("form", ("two-launch", "fused", "mma"))
def test_fp8_out_proj_graph(form, rng, monkeypatch):
    """Every output and workspace supplied: a second eager run and a CUDA-graph replay (fresh
    stream, no allocation or host sync inside) give the first run's bytes, in every form."""
    from h3cupy.ops import out_proj

    _need_sm90()
    monkeypatch.setattr(out_proj, "FUSED_QUANT", form == "fused")
    monkeypatch.setattr(out_proj, "BACKEND", "mma" if form == "mma" else "auto")
    results = check_out_proj_fp8(4824, rng, index_dtype=np.int64, graph=True)
    bad = [r.row() for r in results if not r.passed]
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("backend", ("mma", "wgmma", "wgmma-two-launch"))
def test_nvfp4_out_proj_nan_rows(backend, rng, monkeypatch):
    """attn_out rows holding a NaN through the NVFP4 op: the blocks holding one get the NaN scale
    code 0x7F in act_sf (formats.nvfp4_quantize), so the row's projection is NaN and its out row
    NaN where its gate index is valid, residual exactly where not; every other row is
    bit-identical to the same call on the input without the NaNs (the GEMM is row-independent).
    Before the block amax kept NaNs, a NaN became a finite code (6 x the block scale)."""
    import cupy

    from h3cupy import formats, weights
    from h3cupy.ops import out_proj
    from h3cupy.ops.out_proj import minimax_h3_nvfp4_out_proj
    from h3cupy.reference import inputs as ref_inputs
    from h3cupy.testing import assert_nvfp4_nan_blocks, download, upload

    _need_sm90()
    monkeypatch.setattr(out_proj, "BACKEND", backend.split("-")[0])
    monkeypatch.setattr(out_proj, "NVFP4_FUSED_QUANT", "two-launch" not in backend)
    m = 385
    host = ref_inputs.out_proj_inputs(m, rows=9, rng=rng)
    wq, wsf, wg = weights.quantize_minimax_h3_o_weight_nvfp4(upload(host["o_weight"]))
    clean = host["attn_out"]
    g = formats.nvfp4_global_scale_from_amax(np.max(np.abs(clean.astype(np.float32))))
    idx = host["gate_index"]
    ok = (idx >= 0) & (idx < 9)
    rows = [int(np.flatnonzero(ok)[2]), int(np.flatnonzero(ok)[-1])]
    rows += [int(r) for r in np.flatnonzero(~ok)[:1]]  # a guard row, if the index has one
    a = clean.copy()
    for i, r in enumerate(rows):
        a.view(np.uint16)[r, 123 + 2000 * i] = 0xFFC1 if i % 2 else 0x7FC0

    def call(x):
        act_q = cupy.full((m, 3584), 0x11, np.uint8)
        act_sf = cupy.full((m, 448), 0x22, np.uint8)
        out = minimax_h3_nvfp4_out_proj(
            upload(x),
            wq,
            wsf,
            wg,
            cupy.asarray(np.array([g], np.float32)),
            upload(host["gate"]),
            upload(host["gate_index"]),
            upload(host["residual"]),
            act_q=act_q,
            act_sf=act_sf,
        )
        return download(out), download(act_q), download(act_sf)

    want, _, _ = call(clean)
    got, got_q, got_sf = call(a)
    assert_nvfp4_nan_blocks(got_q, got_sf, a, g)
    for r in rows:
        if ok[r]:
            assert np.isnan(got[r].astype(np.float32)).all(), r
        else:
            assert np.array_equal(got[r].view(np.uint16), host["residual"][r].view(np.uint16))
    keep = np.setdiff1d(np.arange(m), rows)
    assert np.array_equal(got[keep].view(np.uint16), want[keep].view(np.uint16))


# NOTE: 385 and 4824 run the n224 tiles (gemm.bf16_tile_n), 4097 and 38592 the n256 ones; M <= 256
# the 128-column tiles on single CTAs.
@pytest.mark.parametrize(
    "m, fused",
    [(m, True) for m in (1, 127, 129, 385, 4097, 4824, 38592)]
    + [(m, False) for m in (1, 129, 385, 4097, 4824)],
)
def test_nvfp4_out_proj_hopper_path(m, fused, rng, monkeypatch):
    """The NVFP4 op's Hopper path (BACKEND = "wgmma": operands dequantized to exact bf16, the
    bf16 engine, o = bf16(acc * alpha)), same checks, in its single-launch form (attn_out's NVFP4
    quantization and a' written inside the GEMM launch, NVFP4_FUSED_QUANT: the default) and its
    two-launch one."""
    from h3cupy.ops import out_proj

    _need_sm90()
    monkeypatch.setattr(out_proj, "BACKEND", "wgmma")
    monkeypatch.setattr(out_proj, "NVFP4_FUSED_QUANT", fused)
    results = check_out_proj_nvfp4(m, rng)
    bad = [r.row() for r in results if not r.passed]
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("backend", ("mma", "wgmma", "wgmma-two-launch"))
def test_nvfp4_out_proj_graph(backend, rng, monkeypatch):
    """Graph capture and replay of the NVFP4 out_proj on the emulation and on the Hopper path
    (both forms: the single launch zeroes its ready counters with a memset in the graph)."""
    from h3cupy.ops import out_proj

    _need_sm90()
    monkeypatch.setattr(out_proj, "BACKEND", backend.split("-")[0])
    monkeypatch.setattr(out_proj, "NVFP4_FUSED_QUANT", "two-launch" not in backend)
    # the Hopper path at M = 385: clusters of two on n224 tiles
    results = check_out_proj_nvfp4(385 if backend != "mma" else 129, rng, graph=True)
    bad = [r.row() for r in results if not r.passed]
    assert not bad, "\n".join(bad)
