"""``minimax_h3_bf16_pre_attention`` (SPEC.md §3): prologue -> QKV GEMM -> Q/K RMSNorm, RoPE, V,
Ulysses pack, in one launch on sm_90a at M > 256 and two elsewhere.

1. The prologue (RMSNorm + indexed AdaLN) writes the bf16 activation ``a`` ``[M, 5376]`` (into
   ``workspace`` when given).
2. The sm_90a GEMM engine computes ``a @ qkv_weight^T`` (weight in engine row order
   ``[kind, head, dim]``) and its epilogue (``cuda_src/kernels/pre_attention.cu``) applies, per
   row and head, the Q/K RMSNorm, the partial NeoX RoPE of dims [0, 96) from the
   ``(rope_cos_sin, rope_positions)`` pair, V pass-through, and stores the destination-major pack
   ``out[h // hp, m, h % hp, kind, d]`` with TMA.

With :data:`BF16_FUSED_PROLOGUE` (the default since session 25) step 1 runs inside the
GEMM launch on sm_90a at M > 256: the kernel writes ``a`` itself (the same bits) behind
per-128-row-tile ready counters kept in the op's scratch.

No host sync and no per-call allocation when ``workspace`` is given (the engine's tail split,
:data:`h3cupy.ops.gemm.TAIL_SPLIT`, keeps its few-MB scratch per stream, made on a stream's first
call and grown for a larger M, and per capture inside a CUDA graph: :mod:`h3cupy.core.workspace`);
identity positions (``rope_positions=None``) are formed on the device (``p = m``), so there is no
per-M arange to cache and the op is CUDA-graph safe from the first call.
"""

from __future__ import annotations

import functools

from ..core import arch, checks, interop, jit
from ..core.launch import f32, i32, launch, ptr
from . import gemm
from .prologue import D, check_prologue_inputs, in_launch_args, launch_prologue, prologue_reads

HEADS, HEAD_DIM, ROPE_COLS = 56, 128, 96
QKV_ROWS = 3 * HEADS * HEAD_DIM  # 21504
ULYSSES_DEGREES = (1, 2, 4, 8)

PRE_ATTENTION = jit.ModuleSpec(
    "kernels/pre_attention.cu",
    (
        "h3::pre_attention_bf16_x2_sm90",
        "h3::pre_attention_bf16_x2_heads_sm90",
        "h3::pre_attention_bf16_x2_fused_sm90",
        "h3::pre_attention_bf16_x2_fused_heads_sm90",
        "h3::pre_attention_bf16_sm90",
        "h3::pre_attention_bf16_mma_smxx",
    ),
)
PRE_ATTENTION_FP8 = jit.ModuleSpec(
    "kernels/pre_attention_fp8.cu",
    tuple(
        f"h3::pre_attention_fp8{c}_sm90<{mode}>"
        for mode in range(3)
        for c in (
            "_x2",
            "_m192_x2",
            "_m192",
            "_n192",
            "_n192_tail",
            "_n192_fused",
            "_n192_fused_x2",
            "",
        )
    ),
)
OUT_MODES = ("bf16", "e4m3", "nvfp4")
PRE_ATTENTION_FP8_MMA = jit.ModuleSpec(
    "kernels/pre_attention_fp8_mma.cu",
    tuple(f"h3::pre_attention_fp8_mma_smxx<{f}, {mode}>" for f in (1, 2) for mode in range(3)),
)
PRE_ATTENTION_NVFP4 = jit.ModuleSpec(
    "kernels/pre_attention_nvfp4.cu",
    tuple(f"h3::pre_attention_nvfp4_smxx<{mode}>" for mode in range(3))
    + tuple(f"h3::pre_attention_nvfp4_wg{c}_sm90<{m}>" for m in range(3) for c in ("_x2", "")),
)

#: GEMM back end: "auto" (wgmma on sm_90a, mma.sync on sm_120a), "wgmma" or "mma" (the TMA-fed
#: mma.sync back end, sm_90a / sm_120a). A module setting, so that tests can run both on the H200.
BACKEND = "auto"
#: The FP8 op's SM120 instruction form (SPEC §6 ``fp8_mma_form``): -1 per board, 0 legacy
#: ``m16n8k32`` e4m3, 2 ``kind::mxf8f6f4`` with unit scales (identical bits); only the mma.sync
#: back end reads it, and only sm_120a has form 2.
FP8_MMA_FORM = -1
#: The FP8 op's GEMM tiles for M > 256 on sm_90a (at M <= 256: 128 x 128 single CTAs). A module
#: setting, so that tests and benchmarks can run each form.
#:
#: * ``"n192"`` (the default since 2026-12-02): the engine's 128 x 192 tiles (two m64n192 consumer
#:   warpgroups, single CTAs), each CTA running a 384-column pair of them back to back; the head
#:   that straddles a pair is finished from a 16 KiB shared-memory stash per warpgroup
#:   (h3/pre_attention_wg.cuh, EpiPreAttnPair); no tail split unless
#:   :data:`FP8_PAIR_TAIL_SPLIT`. Measured 4-8% faster than ``"m192"`` at M = 4824 ... 38592 on
#:   the H200 (benchmarks/NOTES.md, session 13): m64n192 wgmmas run more FLOP per µs than
#:   ``"m192"``'s m64n128.
#: * ``"m192"``: 192 x 128 tiles, three consumer warpgroups (one head each for 64 rows), in
#:   clusters of :data:`h3cupy.ops.gemm.FP8_CLUSTER` CTAs (the default of sessions 8-12).
#: * ``"m128"``: 128 x 128 tiles, two consumer warpgroups, in clusters of two.
FP8_TILE = "n192"
FP8_TILES = ("n192", "m192", "m128")
#: The tail split (:data:`h3cupy.ops.gemm.TAIL_SPLIT`) for the FP8 op's ``"n192"`` pairs (session
#: 24; its tests passed on an H100 in session 25, where it ran level to 1.2% slower than without it,
#: so off by default; sessions 35-36 on H100s: 1.7-3.1% slower than the two launches without it at M
#: = 4824 / 9648, of which its kernel alone, with one k-range, is 1.3-1.8%: the split gains nothing
#: over its own kernel, where ~3% was counted; benchmarks/NOTES.md): the pairs left for the
#: persistent grid's last round (at M = 4824, 2128 pairs = 16 rounds of 132 CTAs and 16 pairs more,
#: ~5% of the launch with 116 CTAs idle) run as up to 4 k-ranges of both of their tiles on otherwise
#: idle CTAs; each warpgroup's last arrival sums the partials in split order and runs the pair's two
#: epilogues (kernel ``pre_attention_fp8_n192_tail_sm90``). The split tiles' sums differ from the
#: unsplit ones in the last bits (fp32 partials added in another order), and are the same from run
#: to run, eager or in a CUDA graph. True also takes the two launches (:data:`FP8_FUSED_PROLOGUE`'s
#: single launch has no tail split).
FP8_PAIR_TAIL_SPLIT = False
#: A diagnostic (session 36), not a mode for users: the ``"n192"`` pairs in two launches with
#: the tail-split kernel (``pre_attention_fp8_n192_tail_sm90``) even where no split engages, one
#: k-range per pair (the same sums and bytes as the plain kernel), to time the tail kernel's own
#: cost apart from the split's (``scripts/pair_tail_splits.py``; measured 1.3-1.8% slower than
#: the plain kernel on an H100, session 36). True also takes the two launches.
FP8_PAIR_TAIL_KERNEL = False
#: The FP8 op on sm_90a at M > 256 with the ``"n192"`` tiles in one launch (written in session
#: 26, the default since session 27: its tests passed on an H100, and it was faster than the two
#: launches at every centre in two of three runs, by 1.7-6.7% on an H200 (benchmarks/NOTES.md,
#: session 27)): the GEMM kernel writes ``act_q`` and ``act_scale`` itself, with the prologue's
#: arithmetic and reduction order (the same bytes), behind per-128-row-tile ready counters in the
#: op's scratch: the consumer warps the first round's rows before their first tile, the spare
#: producer warps the rest, three passes over each row (its sum of squares, its amax, its codes;
#: kernels/pre_attention_fp8.cu, h3/norm_rows.cuh). False: the prologue launch, then the GEMM.
#: The other tiles, and the pairs with :data:`FP8_PAIR_TAIL_SPLIT` (the single launch has no
#: tail split), keep the two launches.
FP8_FUSED_PROLOGUE = True
#: Cluster size of the ``"n192"`` pairs' single launch (:data:`FP8_FUSED_PROLOGUE`; the two
#: launches keep single CTAs) below :data:`FP8_PAIR_CLUSTER2_FROM_M`: 1 (default), single CTAs;
#: 2, clusters of two on vertically adjacent M-tiles that run the same pairs and multicast each
#: weight tile between them (kernel ``pre_attention_fp8_n192_fused_x2_sm90``, session 31; the
#: same output bytes): 37% fewer L2 bytes per FLOP. :func:`fp8_pair_cluster` gives the size a
#: call at M tokens runs.
FP8_PAIR_CLUSTER = 1
#: From this many tokens on, the single launch runs clusters of two whatever
#: :data:`FP8_PAIR_CLUSTER` says (None: FP8_PAIR_CLUSTER at every M). Measured on an H100
#: (benchmarks/NOTES.md, sessions 31-32), clusters against single CTAs: at M = 38592 2.8-4.2%
#: fewer cycles per call sustained in four runs of four, and +1.2 / +2.4 / +2.9 / +0.8 / -3.6%
#: in five graph-replay runs (where two identical forms spread 3-5%); at 19296 -2.0 / -2.1 /
#: -0.4% in graph replays, level sustained; at 9648 level. The threshold lies between
#: the two centres measured either way (the out_proj's and the MLP's rule,
#: :data:`h3cupy.ops.gemm.FP8_OPS_CLUSTER2_FROM_M`, starts at 16384: there the clusters were
#: already level or faster at 19296).
FP8_PAIR_CLUSTER2_FROM_M = 32768


def fp8_pair_cluster(m: int) -> int:
    """Cluster size of the FP8 pre-attention's single launch (the ``"n192"`` pairs) at ``m``
    tokens: 2 from :data:`FP8_PAIR_CLUSTER2_FROM_M` on, else :data:`FP8_PAIR_CLUSTER` (checked:
    1 or 2). Calls at M <= 256 run 128 x 128 single CTAs whatever this says."""
    if FP8_PAIR_CLUSTER not in (1, 2):
        raise ValueError(
            f"pre_attention.FP8_PAIR_CLUSTER: expected 1 or 2, got {FP8_PAIR_CLUSTER!r}; set one"
            " of them (see its docstring)"
        )
    return gemm.cluster_from_m(m, FP8_PAIR_CLUSTER, FP8_PAIR_CLUSTER2_FROM_M)


#: The BF16 op's epilogue on its 128 x 256 tiles (M > 256, sm_90a), a module setting so that tests
#: and benchmarks can run both forms in one process:
#:
#: * ``"rows"`` (the default): both heads' Q/K RMSNorm and RoPE, row half by row half, then the
#:   two 128-column store passes through the warpgroup's 16 KiB staging buffer, the second pass
#:   waiting for the first pass's TMA store to have read it.
#: * ``"heads"`` (session 23; tested on an H100 in session 25, not faster there): one head at a
#:   time, head 1's math running while head 0's store reads the buffer. The same bits.
BF16_EPILOGUE = "rows"
BF16_EPILOGUES = ("rows", "heads")
#: The BF16 op on sm_90a at M > 256 in one launch (written in session 23, the default since
#: session 25: 0.4-3.4% faster than the two launches at every centre on an H100, the same bits,
#: benchmarks/NOTES.md): the GEMM kernel writes `a` itself (the prologue's rows, the
#: same bits) behind per-128-row-tile ready counters, the first round's rows by the consumer
#: warps before their first tile and the rest by the spare producer warps (h3/norm_rows.cuh,
#: ProNormRows<false>), instead of a prologue launch before it. False: the prologue
#: launch, then the GEMM.
BF16_FUSED_PROLOGUE = True
#: Whether BACKEND = "auto" gives the NVFP4 op its Hopper path (bf16 wgmma on dequantized
#: operands) on sm_90a; False runs the in-register emulation (a correctness vehicle) there.
#: True since the Hopper path passed on the H200 (2026-12-01, tests/test_pre_attention_gpu.py).
NVFP4_HOPPER_DEFAULT = True


def gemm_backend(target: str, hopper_auto: bool = True) -> str:
    """The pre-attention ops' back end on ``target`` (see :data:`BACKEND`): "wgmma" or "mma";
    ``hopper_auto``: whether "auto" means wgmma on sm_90a."""
    auto = "wgmma" if target == "sm_90a" and hopper_auto else "mma"
    backend = BACKEND if BACKEND != "auto" else auto
    if backend == "wgmma" and target != "sm_90a":
        raise RuntimeError(f"the wgmma back end needs sm_90a; this GPU is {target}")
    return backend


def nvfp4_backend(target: str) -> str:
    """The NVFP4 pre-attention's back end on ``target``: "wgmma" (the Hopper path) or "mma"."""
    return gemm_backend(target, NVFP4_HOPPER_DEFAULT)


@arch.on_operand_device("x")
def minimax_h3_bf16_pre_attention(
    x,
    x_norm_weight,
    adaln_scale,
    adaln_shift,
    adaln_index,
    qkv_weight,
    q_norm_weight,
    k_norm_weight,
    rope_cos_sin,
    *,
    ulysses_degree: int,
    out,
    eps: float = 1e-5,
    qk_eps: float | None = None,
    rope_positions=None,
    workspace=None,
):
    """The BF16 pre-attention stage of a MiniMax-H3 block (SPEC.md §3).

    Args:
        x: bf16 ``[M, 5376]`` contiguous hidden states.
        x_norm_weight: bf16 ``[5376]``.
        adaln_scale, adaln_shift: bf16 ``[rows, 5376]`` tables, rows >= 1, unit column stride, a
            shared row stride that is a multiple of 8 elements (column chunks of a
            ``[rows, 6*5376]`` projection are fine), 16-byte aligned.
        adaln_index: int32 or int64 ``[M]``; an index outside ``[0, rows)`` makes the whole
            output row zero (guarded on the device).
        qkv_weight: bf16 ``[21504, 5376]`` contiguous, engine row order ``[kind, head, dim]``
            (see :func:`h3cupy.qkv_rows_checkpoint_to_engine`).
        q_norm_weight, k_norm_weight: bf16 ``[128]``.
        rope_cos_sin: bf16 ``[S, 96]`` contiguous (cos in [0, 48), sin in [48, 96)), S >= 1.
        ulysses_degree: P in {1, 2, 4, 8}.
        out: bf16 ``[P, M, 56 // P, 3, 128]`` contiguous, caller-owned; element
            (m, head h, kind, d) lands at ``out[h // hp, m, h % hp, kind, d]``.
        eps: input RMSNorm epsilon; qk_eps: Q/K RMSNorm epsilon (None: eps). Positive, finite.
        rope_positions: int32 or int64 ``[M]`` cache rows (clamped to ``[0, S)`` on the device);
            None: row m uses cache row m (needs S >= M).
        workspace: bf16 ``[M, 5376]`` contiguous scratch for the activation (overwritten); None
            allocates one per call.

    Returns:
        ``out``.

    Runs on sm_90a (the wgmma engine by default) and sm_120a (the TMA-fed mma.sync back end,
    compile-checked only: no SM120 board here). ``out`` and ``workspace`` must not share memory
    with any operand (ValueError). Raises ValueError / TypeError for bad arguments
    before anything is launched.
    """
    eps = checks.check_positive_finite(eps, "eps")
    qk_eps = eps if qk_eps is None else checks.check_positive_finite(qk_eps, "qk_eps")
    checks.check_choice(ulysses_degree, "ulysses_degree", ULYSSES_DEGREES)
    p = int(ulysses_degree)
    hp = HEADS // p
    xt, wt, st, ht, it, rows, stride = check_prologue_inputs(
        x, x_norm_weight, adaln_scale, adaln_shift, adaln_index
    )
    dev, m = xt.device, xt.shape[0]
    qkv = interop.as_tensor(qkv_weight, "qkv_weight")
    checks.check_tensor(qkv, "qkv_weight", "bf16", (QKV_ROWS, D), dev)
    qn = interop.as_tensor(q_norm_weight, "q_norm_weight")
    checks.check_tensor(qn, "q_norm_weight", "bf16", (HEAD_DIM,), dev, align=4)
    kn = interop.as_tensor(k_norm_weight, "k_norm_weight")
    checks.check_tensor(kn, "k_norm_weight", "bf16", (HEAD_DIM,), dev, align=4)
    cs = interop.as_tensor(rope_cos_sin, "rope_cos_sin")
    checks.check_dtype(cs, "rope_cos_sin", "bf16")
    checks.check_shape(cs, "rope_cos_sin", (None, ROPE_COLS), "(cache rows x 96)")
    s_rows = cs.shape[0]
    if s_rows < 1:
        raise ValueError("rope_cos_sin: expected S >= 1 cache rows, got 0")
    checks.check_tensor(cs, "rope_cos_sin", "bf16", (s_rows, ROPE_COLS), dev, align=4)
    pt = None
    if rope_positions is None:
        if s_rows < m:
            raise ValueError(
                f"rope_cos_sin: identity positions (rope_positions=None) need S >= M = {m} cache "
                f"rows, got S = {s_rows}; pass rope_positions or a longer cache"
            )
    else:
        pt = interop.as_tensor(rope_positions, "rope_positions")
        checks.check_tensor(pt, "rope_positions", ("int32", "int64"), (m,), dev, align=pt.itemsize)
    ot = interop.as_tensor(out, "out")
    checks.check_tensor(ot, "out", "bf16", (p, m, hp, 3, HEAD_DIM), dev)
    if workspace is None:
        at = interop.empty((m, D), "bf16", like=xt)
    else:
        at = interop.as_tensor(workspace, "workspace")
        checks.check_tensor(at, "workspace", "bf16", (m, D), dev)
    checks.check_disjoint(
        [("out", ot), ("workspace", at if workspace is not None else None)],
        [
            *prologue_reads(xt, wt, st, ht, it),
            ("qkv_weight", qkv),
            ("q_norm_weight", qn),
            ("k_norm_weight", kn),
            ("rope_cos_sin", cs),
            ("rope_positions", pt),
        ],
    )
    target = arch.device_target(dev)
    if target not in ("sm_90a", "sm_120a"):
        raise RuntimeError(
            f"minimax_h3_bf16_pre_attention runs on sm_90a (H100 / H200) and sm_120a (RTX 5090 / "
            f"RTX PRO 6000) in this version; this GPU is {target}"
        )
    backend = gemm_backend(target)

    if backend == "mma":
        # Launch 1: the prologue writes a; launch 2 on the mma.sync back end.
        launch_prologue(xt, wt, st, ht, it, rows, stride, eps, "bf16", at, None, None, None)
        _launch_mma(at, qkv, qn, kn, cs, s_rows, pt, qk_eps, hp, ot, m, target)
        return interop.export(ot)
    if BF16_EPILOGUE not in BF16_EPILOGUES:
        raise ValueError(
            f"pre_attention.BF16_EPILOGUE: expected one of {BF16_EPILOGUES}, got "
            f'{BF16_EPILOGUE!r}; set one of them ("rows" is the default)'
        )
    cluster = 2 if m > 256 else 1
    fused = cluster == 2 and bool(BF16_FUSED_PROLOGUE)
    if cluster == 1:
        tile_n, name = 128, "h3::pre_attention_bf16_sm90"
    else:
        form = ("_fused" if fused else "") + ("_heads" if BF16_EPILOGUE == "heads" else "")
        tile_n, name = 256, f"h3::pre_attention_bf16_x2{form}_sm90"
    kernel = jit.get_kernel(PRE_ATTENTION, name, target)
    smem = gemm.wgmma_smem_bytes(tile_n)
    # the last partial round split over k (gemm.TAIL_SPLIT), its counters and partials in
    # scratch of the op's own (per stream; per capture inside a CUDA graph); their zeroing goes
    # before the prologue, so that the prologue and the GEMM are adjacent kernels in the stream
    # (the GEMM's programmatic launch overlaps the prologue's tail: launch.PDL). The single-launch
    # form's ready counters (one word per 128-row tile) go first in the same scratch.
    ready = -(-m // 128) if fused else 0
    k_tiles = D * 2 // 128
    plan = gemm.tail_plan(kernel, m, QKV_ROWS, tile_n, cluster, smem, dev, k_tiles, ready=ready)
    buf = gemm.plan_workspace(plan, None, dev, [xt], "")
    extra: tuple = ()
    if fused:  # the GEMM launch writes a itself
        extra = in_launch_args(xt, wt, st, ht, it, rows, stride, eps, at, buf.data.ptr)
    else:  # Launch 1: the prologue writes a.
        launch_prologue(xt, wt, st, ht, it, rows, stride, eps, "bf16", at, None, None, None)
    # Launch 2 (or the only one): the QKV GEMM with the pre-attention epilogue.
    desc_a = gemm._tensor_map(at.ptr, "bfloat16", D, m, D * 2, 128)
    desc_b = gemm._tensor_map(qkv.ptr, "bfloat16", D, QKV_ROWS, D * 2, tile_n // cluster)
    desc_out = _pack_map(ot.ptr, m, p, hp)
    launch(
        kernel,
        plan.grid,
        384,
        (
            desc_a,
            desc_b,
            desc_out,
            i32(m),
            i32(D * 2),
            ptr(qn),
            ptr(kn),
            ptr(cs),
            i32(s_rows),
            ptr(pt),
            i32(1 if pt is not None and pt.fmt == "int64" else 0),
            f32(qk_eps),
            i32(hp),
            *gemm.tail_args(plan, buf),
            *extra,
        ),
        tensors=[t for t in (xt, at, qkv, qn, kn, cs, pt, ot) if t is not None]
        + ([wt, st, ht, it] if fused else []),
        smem=smem,
        pdl=True,
    )
    return interop.export(ot)


def _launch_mma(at, qkv, qn, kn, cs, s_rows, pt, qk_eps, hp, ot, m, target) -> None:
    """Launch 2 on the TMA-fed mma.sync back end (128 x 256 tiles, 8 warps of 64 x 64)."""
    kernel = jit.get_kernel(PRE_ATTENTION, "h3::pre_attention_bf16_mma_smxx", target)
    plan = gemm.MT_SM120_SCRATCH  # the plan sm_120 boards can hold (99 KiB), on every target
    desc_a, desc_b = gemm.mt_maps(at.ptr, qkv.ptr, "bfloat16", D, m, QKV_ROWS, plan)
    tiles = -(-m // 128) * (QKV_ROWS // 256)
    launch(
        kernel,
        min(tiles, arch.sm_count(at.device)),
        256,
        (
            desc_a,
            desc_b,
            i32(m),
            i32(D * 2),
            ptr(qn),
            ptr(kn),
            ptr(cs),
            i32(s_rows),
            ptr(pt),
            i32(1 if pt is not None and pt.fmt == "int64" else 0),
            f32(qk_eps),
            i32(hp),
            ptr(ot),
        ),
        tensors=[t for t in (at, qkv, qn, kn, cs, pt, ot) if t is not None],
        smem=gemm.mt_smem(plan),
    )


def _check_head_inputs(q_norm_weight, k_norm_weight, rope_cos_sin, dev: int, m: int):
    """The per-head RMSNorm weights (bf16 [128]) and the RoPE cache of the quantized ops (bf16
    [S, 96] with S >= M: identity positions, row m is token m's)."""
    qn = interop.as_tensor(q_norm_weight, "q_norm_weight")
    checks.check_tensor(qn, "q_norm_weight", "bf16", (HEAD_DIM,), dev, align=4)
    kn = interop.as_tensor(k_norm_weight, "k_norm_weight")
    checks.check_tensor(kn, "k_norm_weight", "bf16", (HEAD_DIM,), dev, align=4)
    cs = interop.as_tensor(rope_cos_sin, "rope_cos_sin")
    checks.check_dtype(cs, "rope_cos_sin", "bf16")
    checks.check_shape(cs, "rope_cos_sin", (None, ROPE_COLS), "(cache rows x 96)")
    if cs.shape[0] < m:
        raise ValueError(
            f"rope_cos_sin: expected at least M = {m} rows (row m is token m's), got {cs.shape[0]}"
        )
    checks.check_tensor(cs, "rope_cos_sin", "bf16", (cs.shape[0], ROPE_COLS), dev, align=4)
    return qn, kn, cs


def _qkv_outputs(out_mode: str, qkv, qkv_sf, descales, global_scales, like):
    """Outputs and per-kind scalars of an out_mode (SPEC.md §4): q, k, v (bf16 / e4m3
    [M, 56, 128], or packed e2m1 [M, 56, 64] with scales [M, 56, 8] for nvfp4), checked or
    allocated, and the (device tensor or None, host value) scalar of each kind that the mode
    needs (descales for e4m3, global scales for nvfp4, unused zeros for bf16)."""
    dev, m = like.device, like.shape[0]
    names = ("q", "k", "v")
    d = _kind_scalars(
        descales, tuple(f"{n}_descale" for n in names), dev, out_mode == "e4m3", out_mode
    )
    g = _kind_scalars(
        global_scales, tuple(f"{n}_global_scale" for n in names), dev, out_mode == "nvfp4", out_mode
    )
    if out_mode == "nvfp4":
        outs = [
            checks.output_or_empty(t, n, "uint8", (m, HEADS, 64), like)
            for t, n in zip(qkv, names, strict=True)
        ]
        sfs = [
            checks.output_or_empty(t, f"{n}_sf", "uint8", (m, HEADS, 8), like)
            for t, n in zip(qkv_sf, names, strict=True)
        ]
    else:
        fmt = "bf16" if out_mode == "bf16" else "e4m3"
        outs = [
            checks.output_or_empty(t, n, fmt, (m, HEADS, HEAD_DIM), like)
            for t, n in zip(qkv, names, strict=True)
        ]
        sfs = [None, None, None]
    return outs, sfs, (d if out_mode == "e4m3" else g)


@functools.lru_cache(maxsize=256)
def _pack_map(out_ptr: int, m: int, p: int, hp: int):
    """3-D tensor map of the pack ``[P, M, hp * 384]`` (bf16): boxes of 64 columns x 64 rows x 1
    destination with the 128B swizzle; stores clip rows past M inside each destination. Cached:
    a pure function of (address, shape)."""
    from ..core import tma

    cols = hp * 3 * HEAD_DIM
    return tma.encode(
        out_ptr, "bfloat16", (cols, m, p), (cols * 2, m * cols * 2), (64, 64, 1), swizzle=128
    )


def _kind_scalars(values, names, dev, needed: bool, mode: str):
    """Per-kind scalars (q, k, v) as (device tensor or None, host value) pairs; floats are rounded
    to fp32 by the kernel argument, device arrays are read by the kernel."""
    from .gemm import _scalar_arg

    out = []
    for v, nm in zip(values, names, strict=True):
        if v is None:
            if needed:
                raise ValueError(f"{nm}: required when out_mode={mode!r}")
            out.append((None, 0.0))
            continue
        host, t = _scalar_arg(v, nm, dev)
        out.append((t, host))
    return out


def _qkv_disjoint(out_mode, outs_in, outs, scal, pro, weights, heads, work_in, work) -> None:
    """The quantized pre-attention ops' overlap check: the caller's outputs (q, k, v and their
    scales) and workspaces against each other and every operand read (checks.check_disjoint):
    the prologue's ``pro``, the weight's (name, tensor) pairs, the head inputs ``heads``
    (q_norm_weight, k_norm_weight, rope_cos_sin) and the out_mode's device scalars ``scal``."""
    kinds = ("q", "k", "v")
    names = [*kinds, *(f"{n}_sf" for n in kinds)]
    suffix = "_descale" if out_mode == "e4m3" else "_global_scale"
    checks.check_disjoint(
        [*checks.given(names, outs_in, outs), *checks.given(list(work), work_in, work.values())],
        [
            *prologue_reads(*pro),
            *weights,
            *zip(("q_norm_weight", "k_norm_weight", "rope_cos_sin"), heads, strict=True),
            *((f"{n}{suffix}", t) for n, (t, _) in zip(kinds, scal, strict=True)),
        ],
    )


@arch.on_operand_device("x")
def minimax_h3_fp8_pre_attention(
    x,
    x_norm_weight,
    adaln_scale,
    adaln_shift,
    adaln_index,
    qkv_weight_q,
    qkv_weight_scale,
    q_norm_weight,
    k_norm_weight,
    rope_cos_sin,
    *,
    eps: float = 1e-5,
    out_mode: str = "bf16",
    q=None,
    k=None,
    v=None,
    q_sf=None,
    k_sf=None,
    v_sf=None,
    q_descale=None,
    k_descale=None,
    v_descale=None,
    q_global_scale=None,
    k_global_scale=None,
    v_global_scale=None,
    act_q=None,
    act_scale=None,
):
    """The W8A8 pre-attention stage (SPEC.md §4): prologue with per-token FP8 of ``a``, the FP8
    QKV GEMM (fp32 promotion) with ``y = bf16((acc * act_scale[m]) * w_scale[n])``, per-head Q/K
    RMSNorm (epsilon ``eps``), RoPE with identity positions (row m uses ``rope_cos_sin[m]``), V,
    and the output mode.

    Args:
        x, x_norm_weight, adaln_scale, adaln_shift, adaln_index: as
            :func:`minimax_h3_bf16_pre_attention`.
        qkv_weight_q: e4m3 (or uint8 codes) ``[21504, 5376]`` and qkv_weight_scale fp32
            ``[21504]`` from :func:`h3cupy.quantize_minimax_h3_qkv_weight_fp8` (engine row order).
        q_norm_weight, k_norm_weight: bf16 ``[128]``; rope_cos_sin: bf16 ``[S, 96]``, S >= M.
        out_mode: ``"bf16"`` (q/k/v bf16 ``[M, 56, 128]``), ``"e4m3"`` (e4m3 ``[M, 56, 128]``,
            needs ``q/k/v_descale``) or ``"nvfp4"`` (uint8 codes ``[M, 56, 64]`` and linear
            ue4m3 scales ``q/k/v_sf`` ``[M, 56, 8]``, needs ``q/k/v_global_scale``).
        q, k, v, q_sf, k_sf, v_sf: optional outputs (allocated when omitted). No output or
            workspace may share memory with another operand (ValueError naming both).
        *_descale, *_global_scale: floats or one-element fp32 device arrays (read on the device).
        act_q, act_scale: optional workspaces, e4m3 ``[M, 5376]`` and fp32 ``[M]``.

    Returns:
        ``PreAttentionOutput(q, k, v, q_sf, k_sf, v_sf)``; the ``*_sf`` are None unless
        ``"nvfp4"``.

    Runs on sm_90a (the wgmma engine with fp32 promotion; H200-verified) and sm_120a (the TMA-fed
    mma.sync back end, e4m3 form per :data:`FP8_MMA_FORM`; compile- and SASS-checked, and on
    the H200 when :data:`BACKEND` is ``"mma"``). No host sync; with every output and workspace
    supplied, no per-call allocation (the tail split's scratch: see the module docstring). On
    sm_90a at M > 256 the prologue runs inside the GEMM launch (:data:`FP8_FUSED_PROLOGUE`): one
    launch, ``act_q`` / ``act_scale`` written with the prologue kernel's bytes.
    """

    eps = checks.check_positive_finite(eps, "eps")
    checks.check_choice(out_mode, "out_mode", OUT_MODES)
    xt, wt, st, ht, it, rows, stride = check_prologue_inputs(
        x, x_norm_weight, adaln_scale, adaln_shift, adaln_index
    )
    dev, m = xt.device, xt.shape[0]
    wq = interop.as_tensor(qkv_weight_q, "qkv_weight_q", fp8_as="e4m3")
    checks.check_tensor(wq, "qkv_weight_q", "e4m3", (QKV_ROWS, D), dev)
    ws = interop.as_tensor(qkv_weight_scale, "qkv_weight_scale")
    checks.check_tensor(ws, "qkv_weight_scale", "float32", (QKV_ROWS,), dev)
    qn, kn, cs = _check_head_inputs(q_norm_weight, k_norm_weight, rope_cos_sin, dev, m)
    outs, sfs, scal = _qkv_outputs(
        out_mode,
        (q, k, v),
        (q_sf, k_sf, v_sf),
        (q_descale, k_descale, v_descale),
        (q_global_scale, k_global_scale, v_global_scale),
        xt,
    )
    aq = checks.output_or_empty(act_q, "act_q", "e4m3", (m, D), xt)
    asc = checks.output_or_empty(act_scale, "act_scale", "float32", (m,), xt)
    _qkv_disjoint(
        out_mode,
        (q, k, v, q_sf, k_sf, v_sf),
        (*outs, *sfs),
        scal,
        (xt, wt, st, ht, it),
        [
            ("qkv_weight_q", wq),
            ("qkv_weight_scale", ws),
        ],
        (qn, kn, cs),
        (act_q, act_scale),
        {"act_q": aq, "act_scale": asc},
    )
    target = arch.device_target(dev)
    if target not in ("sm_90a", "sm_120a"):
        raise RuntimeError(
            f"minimax_h3_fp8_pre_attention runs on sm_90a (H100 / H200) and sm_120a (RTX 5090 / "
            f"RTX PRO 6000) in this version; this GPU is {target}"
        )
    backend = gemm_backend(target)

    mode = OUT_MODES.index(out_mode)
    if backend == "mma":
        # Launch 1: prologue with per-token FP8 of a; launch 2 on the mma.sync back end.
        launch_prologue(xt, wt, st, ht, it, rows, stride, eps, "fp8", None, aq, asc, None)
        form = arch.fp8_mma_code(FP8_MMA_FORM, target, arch.device_name(dev))
        kernel = jit.get_kernel(
            PRE_ATTENTION_FP8_MMA, f"h3::pre_attention_fp8_mma_smxx<{form}, {mode}>", target
        )
        launch(
            kernel,
            min(-(-m // 128) * (QKV_ROWS // 256), arch.sm_count(dev)),
            256,
            (
                *gemm.mt_maps(aq.ptr, wq.ptr, "uint8", D, m, QKV_ROWS, gemm.MT_SM120_SCRATCH),
                i32(m),
                i32(D),
                ptr(qn),
                ptr(kn),
                ptr(cs),
                i32(cs.shape[0]),
                f32(eps),
                ptr(asc),
                ptr(ws),
                *(ptr(t) for t in outs),
                *_mode_args(sfs, scal),
            ),
            tensors=[xt, aq, asc, wq, ws, qn, kn, cs, *outs] + _mode_tensors(sfs, scal),
            smem=gemm.mt_smem(gemm.MT_SM120_SCRATCH),
        )
        return _result(outs, sfs)
    # M > 256: FP8_TILE's tiles; else 128 x 128 single CTAs
    if FP8_TILE not in FP8_TILES:
        raise ValueError(
            f"pre_attention.FP8_TILE: expected one of {FP8_TILES}, got {FP8_TILE!r}; set one of "
            "them (see its docstring)"
        )
    large = m > 256
    tile = FP8_TILE if large else "small"
    pairs = tile == "n192"
    wg = 3 if tile == "m192" else 2  # consumer warpgroups
    # (an explicit FP8_PAIR_TAIL_SPLIT or FP8_PAIR_TAIL_KERNEL takes the two launches: the single
    # launch has no tail split)
    fused = bool(FP8_FUSED_PROLOGUE) and pairs and not (FP8_PAIR_TAIL_SPLIT or FP8_PAIR_TAIL_KERNEL)
    pair_cluster = fp8_pair_cluster(m)  # (checks FP8_PAIR_CLUSTER before any launch)
    # (the n192 pairs: fp8_pair_cluster(m) in the single launch, single CTAs in the two launches)
    if tile == "m192":
        cluster = gemm.FP8_CLUSTER
    elif tile == "m128":
        cluster = 2
    else:
        cluster = pair_cluster if fused else 1
    tile_n = 192 if pairs else 128
    suffix = {
        "small": "",
        "n192": "_n192",
        "m128": "_x2",
        "m192": f"_m192{'_x2' if cluster == 2 else ''}",
    }[tile]
    fuse_x2 = ("_fused" if fused else "") + ("_x2" if fused and cluster == 2 else "")
    name = f"h3::pre_attention_fp8{suffix}{fuse_x2}_sm90<{mode}>"
    kernel = jit.get_kernel(PRE_ATTENTION_FP8, name, target)
    desc_a = gemm._tensor_map(aq.ptr, "uint8", D, m, D, 64 * wg)
    desc_b = gemm._tensor_map(wq.ptr, "uint8", D, QKV_ROWS, D, tile_n // cluster)
    descs = _qkv_out_maps(outs, out_mode, m)
    # the pairs' stash: 16 KiB per consumer warpgroup (EpiPreAttnPair::kVecBytes)
    smem = gemm.wgmma_smem_bytes(tile_n, wg=wg, vec=16384 if pairs else 0)
    # the tail split (gemm.TAIL_SPLIT), its counters and partials in the op's scratch. Zeroed
    # before the prologue: the prologue and the GEMM are then adjacent kernels, and the GEMM's
    # programmatic launch overlaps the prologue's tail. The pairs plan in 384-column units (a
    # pair's two 192-column tiles: one counter per pair and warpgroup, two partial tiles per
    # split unit, the layout of tail_split_words at tile_n = 384) and split in the _tail kernel.
    # The single launch's ready counters (one word per 128-row tile) go first in the scratch.
    plan = gemm.tail_plan(
        kernel,
        m,
        QKV_ROWS,
        2 * tile_n if pairs else tile_n,
        cluster,
        smem,
        dev,
        D // 128,
        ready=-(-m // 128) if fused else 0,
        split=(FP8_PAIR_TAIL_SPLIT or not pairs) and not fused,
        wg=wg,
    )
    if pairs and (plan.splits > 1 or FP8_PAIR_TAIL_KERNEL):
        kernel = jit.get_kernel(
            PRE_ATTENTION_FP8, f"h3::pre_attention_fp8_n192_tail_sm90<{mode}>", target
        )
    buf = gemm.plan_workspace(plan, None, dev, [xt], "")
    extra: tuple = ()
    if fused:  # the GEMM launch writes act_q and act_scale itself
        extra = in_launch_args(xt, wt, st, ht, it, rows, stride, eps, aq, buf.data.ptr)
    else:  # Launch 1: prologue with per-token FP8 of a.
        launch_prologue(xt, wt, st, ht, it, rows, stride, eps, "fp8", None, aq, asc, None)
    # Launch 2 (or the only one): the FP8 QKV GEMM with the pre-attention epilogue and the output
    # mode.
    launch(
        kernel,
        plan.grid,
        128 * (wg + 1),
        (
            desc_a,
            desc_b,
            *descs,
            i32(m),
            i32(D),
            ptr(qn),
            ptr(kn),
            ptr(cs),
            i32(cs.shape[0]),
            ptr(asc),
            ptr(ws),
            *_mode_args(sfs, scal),
            f32(eps),
            *gemm.tail_args(plan, buf),
            *extra,
        ),
        tensors=[xt, aq, asc, wq, ws, qn, kn, cs, *outs]
        + _mode_tensors(sfs, scal)
        + ([wt, st, ht, it] if fused else []),
        smem=smem,
        pdl=True,
    )
    return _result(outs, sfs)


def _mode_args(sfs, scal) -> tuple:
    """The out-mode kernel arguments of the quantized pre-attention kernels: the three NVFP4
    scale outputs, the per-kind scalar pointers, then their host values."""
    return (
        *(ptr(t) for t in sfs),
        *(ptr(t) for t, _ in scal),
        *(f32(h) for _, h in scal),
    )


def _mode_tensors(sfs, scal) -> list:
    """The device tensors behind :func:`_mode_args` (for the launch's stream choice)."""
    return [t for t in sfs if t is not None] + [t for t, _ in scal if t is not None]


def _result(outs, sfs):
    """``PreAttentionOutput`` of the exported outputs (the ``*_sf`` None unless nvfp4)."""
    from ..reference.pre_attention import PreAttentionOutput

    ex = interop.export
    return PreAttentionOutput(
        *(ex(t) for t in outs), *(ex(t) if t is not None else None for t in sfs)
    )


def _qkv_out_maps(outs, out_mode: str, m: int) -> list:
    """The q, k, v tensor maps of the wgmma epilogue (h3/pre_attention_wg.cuh) for an out mode."""
    if out_mode == "nvfp4":
        return [_out_map(t.ptr, m, HEADS * 64, "uint8", 64, 0) for t in outs]
    if out_mode == "e4m3":
        return [_out_map(t.ptr, m, HEADS * HEAD_DIM, "uint8", 128, 128) for t in outs]
    return [_out_map(t.ptr, m, HEADS * HEAD_DIM, "bfloat16", 64, 128) for t in outs]


@functools.lru_cache(maxsize=256)
def _out_map(out_ptr: int, m: int, cols: int, dtype: str, box_cols: int, swizzle: int):
    """2-D tensor map of an output viewed as ``[M, cols]`` with boxes of ``box_cols`` x 64 rows."""
    from ..core import tma

    esize = 2 if dtype == "bfloat16" else 1
    return tma.encode_2d(out_ptr, dtype, cols, m, cols * esize, box_cols, 64, swizzle)


@arch.on_operand_device("x")
def minimax_h3_nvfp4_pre_attention(
    x,
    x_norm_weight,
    adaln_scale,
    adaln_shift,
    adaln_index,
    qkv_weight_q,
    qkv_weight_sf,
    qkv_weight_global_scale,
    act_global_scale,
    q_norm_weight,
    k_norm_weight,
    rope_cos_sin,
    *,
    eps: float = 1e-5,
    out_mode: str = "bf16",
    alpha=None,
    q=None,
    k=None,
    v=None,
    q_sf=None,
    k_sf=None,
    v_sf=None,
    q_descale=None,
    k_descale=None,
    v_descale=None,
    q_global_scale=None,
    k_global_scale=None,
    v_global_scale=None,
    act_q=None,
    act_sf=None,
    workspace_a=None,
    workspace_w=None,
):
    """The W4A4 pre-attention stage (SPEC.md §4): prologue with NVFP4 of ``a`` under the device
    ``act_global_scale``, the NVFP4 QKV GEMM with ``y = bf16(acc * alpha)``, Q/K RMSNorm + RoPE
    (identity positions), V, and the output mode — as :func:`minimax_h3_fp8_pre_attention`.

    Args:
        qkv_weight_q: uint8 ``[21504, 2688]`` packed e2m1 codes; qkv_weight_sf: 128x4-swizzled
            ue4m3 scales (21504 * 336 contiguous, 16-byte aligned bytes);
            qkv_weight_global_scale: a positive float or one-element fp32
            device array (from :func:`h3cupy.quantize_minimax_h3_qkv_weight_nvfp4`).
        act_global_scale: one-element fp32 device array (``[1]``), read on the device.
        alpha: optional ``1 / (act_global_scale * qkv_weight_global_scale)`` as a float or a
            device array; formed on the device when omitted (no host read).
        act_q, act_sf: optional workspaces, uint8 ``[M, 2688]`` and ``[M, 336]`` (linear).
        workspace_a, workspace_w: optional bf16 ``[M, 5376]`` and ``[21504, 5376]`` workspaces of
            the sm_90a path (the dequantized operands); unused elsewhere.
        The rest: as :func:`minimax_h3_fp8_pre_attention`.

    Returns:
        ``PreAttentionOutput(q, k, v, q_sf, k_sf, v_sf)``.

    Runs on sm_120a (block-scaled ``kind::mxf4nvf4`` MMA; compile-checked only) and sm_90a: by
    default the Hopper path (a' = e2m1 * sf and w' = e2m1 * sf dequantized to bf16, exact,
    then the bf16 wgmma engine with ``y = bf16(acc * alpha)``; H200-verified 2026-12-01,
    :data:`NVFP4_HOPPER_DEFAULT`), or with :data:`BACKEND` = ``"mma"`` the in-register emulation
    of the block-scaled MMA (correct, slow). No host sync; with every output and workspace
    supplied, no allocation.
    """
    from ..core import tma
    from .gemm import _scalar_arg

    eps = checks.check_positive_finite(eps, "eps")
    checks.check_choice(out_mode, "out_mode", OUT_MODES)
    xt, wt, st, ht, it, rows, stride = check_prologue_inputs(
        x, x_norm_weight, adaln_scale, adaln_shift, adaln_index
    )
    dev, m = xt.device, xt.shape[0]
    wq, wsf, gw_host, gw_t, ga = gemm.check_nvfp4_weight(
        qkv_weight_q,
        qkv_weight_sf,
        qkv_weight_global_scale,
        act_global_scale,
        "qkv_weight",
        QKV_ROWS,
        D,
        dev,
    )
    alpha_host, alpha_t = _scalar_arg(alpha, "alpha", dev)
    qn, kn, cs = _check_head_inputs(q_norm_weight, k_norm_weight, rope_cos_sin, dev, m)
    outs, sfs, scal = _qkv_outputs(
        out_mode,
        (q, k, v),
        (q_sf, k_sf, v_sf),
        (q_descale, k_descale, v_descale),
        (q_global_scale, k_global_scale, v_global_scale),
        xt,
    )
    aq = checks.output_or_empty(act_q, "act_q", "uint8", (m, D // 2), xt)
    asf = checks.output_or_empty(act_sf, "act_sf", "uint8", (m, D // 16), xt)
    target = arch.device_target(dev)
    if target not in ("sm_90a", "sm_120a"):
        raise RuntimeError(
            f"minimax_h3_nvfp4_pre_attention runs on sm_120a and sm_90a in this version; this GPU "
            f"is {target}"
        )

    backend = nvfp4_backend(target)
    a_bf = w_bf = None
    if backend == "wgmma":
        a_bf = checks.output_or_empty(workspace_a, "workspace_a", "bf16", (m, D), xt)
        w_bf = checks.output_or_empty(workspace_w, "workspace_w", "bf16", (QKV_ROWS, D), xt)
    _qkv_disjoint(
        out_mode,
        (q, k, v, q_sf, k_sf, v_sf),
        (*outs, *sfs),
        scal,
        (xt, wt, st, ht, it),
        [
            ("qkv_weight_q", wq),
            ("qkv_weight_sf", wsf),
            ("qkv_weight_global_scale", gw_t),
            ("act_global_scale", ga),
            ("alpha", alpha_t),
        ],
        (qn, kn, cs),
        (act_q, act_sf, workspace_a, workspace_w),
        {"act_q": aq, "act_sf": asf, "workspace_a": a_bf, "workspace_w": w_bf},
    )

    # Launch 1: prologue with NVFP4 of a under the device global scale (linear scales).
    launch_prologue(xt, wt, st, ht, it, rows, stride, eps, "nvfp4", None, aq, asf, ga)
    mode = OUT_MODES.index(out_mode)
    if backend == "wgmma":
        # Launches 2 and 3: a' and w' (exact bf16); 4: the bf16 engine with the epilogue.
        desc_a, desc_b, tile_n, cluster = gemm.nvfp4_bf16_operands(aq, asf, wq, wsf, a_bf, w_bf)
        name = f"h3::pre_attention_nvfp4_wg{'_x2' if cluster == 2 else ''}_sm90<{mode}>"
        kernel = jit.get_kernel(PRE_ATTENTION_NVFP4, name, target)
        smem = gemm.wgmma_smem_bytes(tile_n)
        launch(
            kernel,
            gemm.engine_grid(kernel, m, QKV_ROWS, tile_n, cluster, smem, dev),
            384,
            (
                desc_a,
                desc_b,
                *_qkv_out_maps(outs, out_mode, m),
                i32(m),
                i32(D * 2),
                ptr(qn),
                ptr(kn),
                ptr(cs),
                i32(cs.shape[0]),
                f32(eps),
                ptr(alpha_t),
                ptr(None if alpha is not None else ga),
                ptr(gw_t),
                f32(gw_host),
                f32(alpha_host),
                *_mode_args(sfs, scal),
            ),
            tensors=[a_bf, w_bf, ga, qn, kn, cs, *outs]
            + _mode_tensors(sfs, scal)
            + [t for t in (gw_t, alpha_t) if t is not None],
            smem=smem,
        )
        return _result(outs, sfs)
    # Launch 2: the NVFP4 GEMM with the pre-attention epilogue and the output mode.
    kh = D // 2
    kernel = jit.get_kernel(PRE_ATTENTION_NVFP4, f"h3::pre_attention_nvfp4_smxx<{mode}>", target)
    tiles = -(-m // 128) * (QKV_ROWS // 256)
    launch(
        kernel,
        min(tiles, arch.sm_count(dev)),
        256,
        (
            *gemm.nv_maps(aq.ptr, wq.ptr, kh, m, QKV_ROWS),
            tma.encode_2d(asf.ptr, "uint8", D // 16, m, D // 16, 16, 128),
            ptr(wsf),
            i32(D // 64),
            i32(m),
            i32(kh),
            ptr(qn),
            ptr(kn),
            ptr(cs),
            i32(cs.shape[0]),
            f32(eps),
            ptr(alpha_t),
            ptr(None if alpha is not None else ga),
            ptr(gw_t),
            f32(gw_host),
            f32(alpha_host),
            *(ptr(t) for t in outs),
            *_mode_args(sfs, scal),
        ),
        tensors=[xt, aq, asf, wq, wsf, ga, qn, kn, cs, *outs]
        + _mode_tensors(sfs, scal)
        + [t for t in (gw_t, alpha_t) if t is not None],
        smem=gemm.nv_smem(gemm.NV_SM120_PA),
    )
    return _result(outs, sfs)
