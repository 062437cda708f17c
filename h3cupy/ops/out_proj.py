"""``minimax_h3_fp8_out_proj`` (SPEC.md §5): quantize ``attn_out`` per token, project with the
FP8 O weight, and add the gated residual.

    act_q, act_scale = per-token FP8 of attn_out        (s = max(amax, 1e-12) / 448, true division)
    o   = bf16((acc * act_scale[m]) * w_scale[n])        (acc: fp32, FP8 wgmma with fp32 promotion)
    out = bf16(residual + bf16(gate[i] * o)),  i = gate_index[m];  out = residual when i is invalid

One launch on sm_90a by default (``FUSED_QUANT``): the GEMM's consumer warps quantize the rows
that its first round of tiles reads, its spare producer warps the rest, each 128-row tile
published through a counter that the TMA producer waits on (``cuda_src/kernels/out_proj.cu``);
``FUSED_QUANT = False`` runs the quantization as a launch of its own first. ``out`` may be
``residual``.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..core import arch, checks, interop, jit
from ..core.launch import i32, i64, launch, ptr
from . import gemm

ATTN, D = 7168, 5376

#: True: the single-launch form (attn_out quantized inside the GEMM launch, published per 128-row
#: tile through counters); False: a quantization launch, then the GEMM. A module setting, read
#: by the FP8 out_proj on the wgmma back end (the MLP has its own, ``mlp.FUSED_QUANT``). True since
#: session 7 (then 1-2% faster than two launches on the H200); session 9's runs measured the two
#: forms level within ~1.5% either way, and issue #6 asks for the quantization inside the launch.
FUSED_QUANT = True


class GatedGemmPlan(NamedTuple):
    """How the FP8 GEMM with the gated residual runs on the sm_90a engine for one M and K:
    the kernel, its tile and cluster, and ``tail`` (:class:`h3cupy.ops.gemm.TailPlan`: grid, tail
    split, and the workspace layout, whose first ``ready`` words are the single-launch form's
    tile counters; reserved, and zeroed, in the two-launch form too)."""

    kernel: object
    cluster: int
    tile_n: int
    smem: int
    ready: int
    tail: gemm.TailPlan


#: Shared-memory bytes of the single-launch 192-column kernels' row staging (out_proj.cu,
#: ProQuantRowsFp8<true>::kSmemBytes: 32 bytes of barrier and amax words, a 14336-byte row buffer).
FUSED_ROW_SMEM = 32 + 14336


def gated_smem_bytes(tile_n: int, fused: bool) -> int:
    """Dynamic shared memory of the FP8 out_proj kernel with ``tile_n``-column tiles (192 or
    128), single-launch (``fused``) or not: the engine's layout with the gated residual's full
    staging, its epilogue vectors and, in the 192-column single-launch kernels, the spare warps'
    row buffer."""
    # the 192-column kernels take the epilogue's vectors through shared memory (out_proj.cu,
    # EpiGatedResidual's kVecBytes: 192 weight scales, 64 eight-byte gate indices and, since
    # session 18, the 64 rows' activation scales per warpgroup)
    vec = 4 * 192 + 64 * 8 + 64 * 4 if tile_n == 192 else 0
    # the 192-column single-launch kernels' spare warps stage each row in shared memory
    # (ProQuantRowsFp8's kSmemBytes: an mbarrier, three amax words and a 14 KiB row buffer)
    hook = FUSED_ROW_SMEM if fused and tile_n == 192 else 0
    return gemm.wgmma_smem_bytes(tile_n, full_staging=True, vec=vec, hook=hook)


def plan_fp8_gemm_wgmma(
    m: int, k: int, fused: bool, dev: int, extra_ready: int = 0
) -> GatedGemmPlan:
    """The :class:`GatedGemmPlan` for ``out[m, 5376]`` over act_q ``[m, k]`` on device ``dev``
    (``fused``: the single-launch form, which quantizes the activation inside the launch). The
    tail split follows :data:`h3cupy.ops.gemm.TAIL_SPLIT`. ``extra_ready``: words reserved (and
    zeroed) right after this GEMM's ready counters, ahead of the tail split's, for another launch
    of the op (the MLP's single-launch FC1: its own ready counters)."""
    cluster = gemm.fp8_ops_cluster(m)
    tile_n = 192 if m > 256 else 128
    tiles = "" if m <= 256 else "_x2" if cluster == 2 else "_n192"
    name = f"h3::out_proj_fp8{'_fused' if fused else ''}{tiles}_sm90"
    kernel = jit.get_kernel(OUT_PROJ, name, arch.device_target(dev))
    smem = gated_smem_bytes(tile_n, fused)
    # NOTE: the ready counters' words are reserved in both forms, so that the tail split's
    # counters and partials never overlap the ready flags the ops document as zeroed at the front
    # of workspace_flags (with them in the two-launch form's words 128.., a caller reading its
    # zeroed flags after the call found partial sums there: M = 149796 on single CTAs, H200).
    ready = -(-m // 128)
    tail = gemm.tail_plan(
        kernel, m, D, tile_n, cluster, smem, dev, k // 128, ready=ready + extra_ready
    )
    return GatedGemmPlan(kernel, cluster, tile_n, smem, ready, tail)


# SPEC.md §5: ``out`` may be ``residual`` itself (the epilogue reads a row's residual before
# writing it); any other overlap of a written operand is refused (checks.check_disjoint).
OUT_ALIASES = (("out", "residual"),)


def check_flags(workspace_flags, like, m: int, helper: str) -> object:
    """A caller's ``workspace_flags``: 1-D contiguous int32 on ``like``'s device with at least
    ``ceil(m / 128)`` elements (what ``helper(m)`` asks on every back end; on the wgmma one the
    launch plan may ask more, which :func:`h3cupy.ops.gemm.plan_workspace` checks), or None."""
    if workspace_flags is None:
        return None
    ft = interop.as_tensor(workspace_flags, "workspace_flags")
    checks.check_dtype(ft, "workspace_flags", "int32")
    if len(ft.shape) != 1:
        raise ValueError(f"workspace_flags: expected a 1-D int32 array, got shape {list(ft.shape)}")
    checks.check_tensor(ft, "workspace_flags", "int32", (ft.shape[0],), like.device)
    if ft.shape[0] < -(-m // 128):
        raise ValueError(
            f"workspace_flags: expected at least {-(-m // 128)} int32 elements for M = {m} "
            f"(one per 128 rows), got {ft.shape[0]}; size it with {helper}(M)"
        )
    return ft


def minimax_h3_fp8_out_proj_flags(m: int) -> int:
    """Length of the int32 ``workspace_flags`` that :func:`minimax_h3_fp8_out_proj` expects for
    ``m`` tokens on the current GPU under the current settings: the single-launch form's ready
    counter per 128-row tile, then the tail split's counters and partial sums (several MB at
    some M; see :data:`h3cupy.ops.gemm.TAIL_SPLIT`). At least ``ceil(m / 128)``."""
    m = int(m)
    if m < 1:
        raise ValueError(f"m: expected M >= 1, got {m}")
    return _flags_words(m, ATTN, FUSED_QUANT)


def _flags_words(m: int, k: int, fused: bool, extra_ready: int = 0) -> int:
    """max(ceil(m / 128), the wgmma plan's words) on the current device (just the former on
    other back ends, and without a usable GPU, where the op cannot run). ``extra_ready``: the
    words another launch of the op reserves after the ready counters (the MLP's FC1)."""
    import cupy

    n = -(-m // 128)
    try:
        dev = arch.current_device()
        target = arch.device_target(dev)
    except cupy.cuda.runtime.CUDARuntimeError:
        return n
    if gemm_backend(target) != "wgmma":
        return n
    return max(n, plan_fp8_gemm_wgmma(m, k, fused, dev, extra_ready).tail.words)


OUT_PROJ = jit.ModuleSpec(
    "kernels/out_proj.cu",
    (
        "h3::out_proj_fp8_x2_sm90",
        "h3::out_proj_fp8_sm90",
        "h3::out_proj_fp8_fused_x2_sm90",
        "h3::out_proj_fp8_fused_sm90",
        "h3::out_proj_fp8_n192_sm90",
        "h3::out_proj_fp8_fused_n192_sm90",
        "h3::out_proj_nvfp4_smxx",
        "h3::out_proj_fp8_mma_smxx<1>",
        "h3::out_proj_fp8_mma_smxx<2>",
        "h3::out_proj_nvfp4_wg_x2_sm90",
        "h3::out_proj_nvfp4_wg_n224_x2_sm90",
        "h3::out_proj_nvfp4_wg_sm90",
        "h3::out_proj_nvfp4_wg_fused_x2_sm90",
        "h3::out_proj_nvfp4_wg_fused_n224_x2_sm90",
        "h3::out_proj_nvfp4_wg_fused_sm90",
    ),
)

#: GEMM back end of the FP8 and NVFP4 out_proj and of the MLP: "auto" (wgmma on sm_90a, mma.sync
#: on sm_120a), "wgmma" or "mma" (the TMA-fed mma.sync back end, also on sm_90a, where NVFP4 is the
#: in-register emulation; always two launches, FUSED_QUANT is not read there). A module setting,
#: so that tests can run both on the H200.
BACKEND = "auto"
#: The FP8 out_proj's SM120 instruction form (SPEC §6 ``fp8_mma_form``): -1 per board, 0 legacy
#: e4m3, 2 ``kind::mxf8f6f4`` with unit scales (identical bits); read by the mma.sync back end.
FP8_MMA_FORM = -1
#: Whether BACKEND = "auto" gives the NVFP4 out_proj its Hopper path (bf16 wgmma on dequantized
#: operands) on sm_90a; False runs the in-register emulation there. True since the Hopper path
#: passed on the H200 (2026-12-01, tests/test_out_proj_gpu.py).
NVFP4_HOPPER_DEFAULT = True
#: The NVFP4 out_proj's Hopper path: attn_out's NVFP4 quantization (act_q, act_sf and the bf16
#: a' the engine reads) inside the GEMM launch, by its consumer warps before their first tile and
#: its spare producer warps after (out_proj.cu ProQuantRowsNvfp4). False: the two-launch form
#: (fp4_quantize's kernel, then a' dequantized by a launch of its own), kept to measure against.
NVFP4_FUSED_QUANT = True


def gated_args(rt, gt, gstride: int, rows: int, it) -> tuple:
    """The gated-residual kernel arguments shared by every out_proj / FC2 kernel: residual, gate
    table, its row stride and row count, gate_index and whether it is int64."""
    return (ptr(rt), ptr(gt), i64(gstride), i64(rows), ptr(it), i32(1 if it.fmt == "int64" else 0))


def gemm_backend(target: str) -> str:
    """The back end the out_proj ops and the MLP use on ``target`` (see :data:`BACKEND`)."""
    backend = BACKEND if BACKEND != "auto" else ("wgmma" if target == "sm_90a" else "mma")
    if backend == "wgmma" and target != "sm_90a":
        raise RuntimeError(f"the wgmma back end needs sm_90a; this GPU is {target}")
    return backend


def nvfp4_backend(target: str) -> str:
    """The NVFP4 out_proj's back end on ``target`` ("wgmma": the Hopper path; "mma")."""
    if BACKEND == "auto" and not NVFP4_HOPPER_DEFAULT:
        return "mma"  # the in-register emulation (see the constant)
    return gemm_backend(target)


def launch_fp8_gemm_wgmma(
    plan: GatedGemmPlan, buf, aq, asc, wq, ws, rt, gt, gstride, rows, it, ot, m, k, src, more
) -> None:
    """The FP8 GEMM with the gated-residual epilogue on the sm_90a engine (out_proj and the MLP's
    FC2): ``out[m, 5376] = bf16(residual + bf16(gate[i] * o))`` over act_q ``[m, k]``, the
    residual tile prefetched by TMA under the mainloop, run as ``plan`` says with workspace
    ``buf`` (:func:`h3cupy.ops.gemm.plan_workspace`). ``src``: the bf16 activation that the
    single-launch form quantizes into act_q (None for the two-launch form); ``more``: further
    tensors whose stream the launch follows."""
    if src is not None and k % 256:
        # the single-launch form's row quantizers move 256 values per warp-wide load
        raise ValueError(f"the single-launch FP8 GEMM needs K % 256 == 0; got K = {k}")
    tile_n, cluster = plan.tile_n, plan.cluster
    fused: tuple = ()
    if src is not None:
        fused = (ptr(src), ptr(aq), np.uint64(buf.data.ptr))
    launch(
        plan.kernel,
        plan.tail.grid,
        384,
        (
            gemm._tensor_map(aq.ptr, "uint8", k, m, k, 128),
            gemm._tensor_map(wq.ptr, "uint8", k, D, k, tile_n // cluster),
            gemm._tensor_map(ot.ptr, "bfloat16", D, m, D * 2, 64),
            gemm._tensor_map(rt.ptr, "bfloat16", D, m, D * 2, 64),
            i32(m),
            i32(D),
            i32(k),
            ptr(asc),
            ptr(ws),
            *gated_args(rt, gt, gstride, rows, it),
            *gemm.tail_args(plan.tail, buf),
            *fused,
        ),
        tensors=[*more, aq, asc, wq, ws, gt, it, rt, ot],
        smem=plan.smem,
        pdl=True,
    )


def launch_fp8_gemm_mma(code: int, aq, asc, wq, ws, rt, gt, gstride, rows, it, ot, m, k) -> None:
    """The FP8 GEMM with the gated-residual epilogue on the mma.sync back end (out_proj and the
    MLP's FC2): ``out[m, 5376] = bf16(residual + bf16(gate[i] * o))`` over act_q ``[m, k]``;
    ``code`` the kernel's e4m3 form (:func:`h3cupy.core.arch.fp8_mma_code`)."""
    dev = aq.device
    target = arch.device_target(dev)
    kernel = jit.get_kernel(OUT_PROJ, f"h3::out_proj_fp8_mma_smxx<{code}>", target)
    launch(
        kernel,
        min(-(-m // 128) * -(-D // 256), arch.sm_count(dev)),
        256,
        (
            *gemm.mt_maps(aq.ptr, wq.ptr, "uint8", k, m, D, gemm.MT_SM120),
            i32(m),
            i32(D),
            i32(k),
            ptr(asc),
            ptr(ws),
            *gated_args(rt, gt, gstride, rows, it),
            ptr(ot),
        ),
        tensors=[aq, asc, wq, ws, rt, gt, it, ot],
        smem=gemm.mt_smem(gemm.MT_SM120),
    )


def _check_attn_out(attn_out):
    """attn_out: bf16 ``[M >= 1, 7168]`` contiguous. Returns (tensor, device, M)."""
    at = interop.as_tensor(attn_out, "attn_out")
    dev = at.device
    checks.check_dtype(at, "attn_out", "bf16")
    checks.check_shape(at, "attn_out", (None, ATTN), "(tokens x 56 heads * 128)")
    m = at.shape[0]
    if m < 1:
        raise ValueError("attn_out: expected M >= 1 rows, got 0")
    checks.check_tensor(at, "attn_out", "bf16", (m, ATTN), dev)
    return at, dev, m


def _check_gated(gate, gate_index, residual, m: int, dev: int):
    """The gated residual's operands: gate table ``[rows, 5376]`` (strided rows allowed),
    gate_index int32 / int64 ``[M]``, residual bf16 ``[M, 5376]``. Returns
    (gate, rows, row stride, gate_index, residual)."""
    gt = interop.as_tensor(gate, "gate")
    rows, gstride = checks.check_table(gt, "gate", D, dev)
    it = interop.as_tensor(gate_index, "gate_index")
    checks.check_tensor(it, "gate_index", ("int32", "int64"), (m,), dev, align=it.itemsize)
    rt = interop.as_tensor(residual, "residual")
    checks.check_tensor(rt, "residual", "bf16", (m, D), dev)
    return gt, rows, gstride, it, rt


@arch.on_operand_device("attn_out")
def minimax_h3_fp8_out_proj(
    attn_out,
    o_weight_q,
    o_weight_scale,
    gate,
    gate_index,
    residual,
    *,
    out=None,
    act_q=None,
    act_scale=None,
    workspace_flags=None,
):
    """The W8A8 attention output projection with the fused gated residual (SPEC.md §5).

    Args:
        attn_out: bf16 ``[M, 7168]`` contiguous (column ``h*128 + d``).
        o_weight_q: e4m3 (or uint8 codes) ``[5376, 7168]`` and o_weight_scale fp32 ``[5376]`` from
            :func:`h3cupy.quantize_minimax_h3_o_weight_fp8`.
        gate: bf16 ``[rows, 5376]`` table, rows >= 1, unit column stride, row stride a multiple of
            8 elements (a column chunk of the modulation projection is fine), 16-byte aligned.
        gate_index: int32 or int64 ``[M]``; an index outside ``[0, rows)`` gives
            ``out = residual`` exactly (guarded on the device).
        residual: bf16 ``[M, 5376]`` contiguous.
        out: optional bf16 ``[M, 5376]``; may be ``residual`` itself (the same view). No
            output or workspace may otherwise share memory with another operand (ValueError
            naming both).
        act_q, act_scale: optional workspaces, e4m3 ``[M, 7168]`` and fp32 ``[M]`` (filled with
            the per-token FP8 of ``attn_out``).
        workspace_flags: optional int32 ``[n]``, n >= :func:`minimax_h3_fp8_out_proj_flags`
            (M) (a longer one is fine): the single-launch form's per-tile ready counters and
            the tail split's counters and fp32 partial sums (the op zeroes what it needs).
            Without it the op uses scratch of its own: per stream for eager calls, per capture
            (kept for the process's life) inside a CUDA-graph capture, so a capture on any
            stream works and replays the eager call's bits.

    Returns:
        ``out``.

    Runs on sm_90a (the wgmma engine, fp32 promotion; H200-verified) and sm_120a (the TMA-fed
    mma.sync back end, two launches, e4m3 form per :data:`FP8_MMA_FORM`; compile- and
    SASS-checked, run on the H200 with :data:`BACKEND` = ``"mma"``). No host sync; no allocation
    when ``out`` and the workspaces (``workspace_flags`` included) are given.
    """
    from ..weights import _kernel as quant_kernel

    at, dev, m = _check_attn_out(attn_out)
    wq = interop.as_tensor(o_weight_q, "o_weight_q", fp8_as="e4m3")
    checks.check_tensor(wq, "o_weight_q", "e4m3", (D, ATTN), dev)
    ws = interop.as_tensor(o_weight_scale, "o_weight_scale")
    checks.check_tensor(ws, "o_weight_scale", "float32", (D,), dev)
    gt, rows, gstride, it, rt = _check_gated(gate, gate_index, residual, m, dev)
    ot = checks.output_or_empty(out, "out", "bf16", (m, D), at)

    aq = checks.output_or_empty(act_q, "act_q", "e4m3", (m, ATTN), at)
    asc = checks.output_or_empty(act_scale, "act_scale", "float32", (m,), at)
    ft = check_flags(workspace_flags, at, m, "minimax_h3_fp8_out_proj_flags")
    checks.check_disjoint(
        checks.given(
            ("out", "act_q", "act_scale", "workspace_flags"),
            (out, act_q, act_scale, workspace_flags),
            (ot, aq, asc, ft),
        ),
        [
            ("attn_out", at),
            ("o_weight_q", wq),
            ("o_weight_scale", ws),
            ("gate", gt),
            ("gate_index", it),
            ("residual", rt),
        ],
        OUT_ALIASES,
    )
    target = arch.device_target(dev)
    if target not in ("sm_90a", "sm_120a"):
        raise RuntimeError(
            f"minimax_h3_fp8_out_proj runs on sm_90a (H100 / H200) and sm_120a (RTX 5090 / RTX "
            f"PRO 6000) in this version; this GPU is {target}"
        )
    backend = gemm_backend(target)

    fused = FUSED_QUANT and backend == "wgmma"
    plan = buf = None
    if backend != "mma":
        # The single-launch form's ready counters and the tail split's counters (zeroed here,
        # before the quantization launch: the GEMM then directly follows a kernel, whose tail
        # its programmatic launch overlaps, launch.PDL) and partials, in workspace_flags or the
        # op's scratch.
        plan = plan_fp8_gemm_wgmma(m, ATTN, fused, dev)
        buf = gemm.plan_workspace(
            plan.tail, ft, dev, [at], "minimax_h3_fp8_out_proj_flags", flags=-(-m // 128)
        )
    if not fused:
        # Launch 1: per-token FP8 of attn_out (one CTA per row).
        launch(
            quant_kernel("quantize_rows_fp8_smxx", dev),
            m,
            256,
            (ptr(at), i32(ATTN), ptr(None), ptr(aq), ptr(asc)),
            tensors=[at, aq, asc],
        )
    # The FP8 GEMM with the gated-residual epilogue.
    if backend == "mma":
        form = arch.fp8_mma_code(FP8_MMA_FORM, target, arch.device_name(dev))
        launch_fp8_gemm_mma(form, aq, asc, wq, ws, rt, gt, gstride, rows, it, ot, m, ATTN)
        return interop.export(ot)
    src = at if fused else None
    launch_fp8_gemm_wgmma(
        plan, buf, aq, asc, wq, ws, rt, gt, gstride, rows, it, ot, m, ATTN, src, [at]
    )
    return interop.export(ot)


@arch.on_operand_device("attn_out")
def minimax_h3_nvfp4_out_proj(
    attn_out,
    o_weight_q,
    o_weight_sf,
    o_weight_global_scale,
    act_global_scale,
    gate,
    gate_index,
    residual,
    *,
    out=None,
    act_q=None,
    act_sf=None,
    workspace_a=None,
    workspace_w=None,
):
    """The W4A4 attention output projection with the fused gated residual (SPEC.md §5).

    Args:
        attn_out: bf16 ``[M, 7168]`` contiguous.
        o_weight_q: uint8 ``[5376, 3584]`` packed e2m1 codes; o_weight_sf: 128x4-swizzled ue4m3
            scales (5376 * 448 bytes, any contiguous, 16-byte aligned uint8 array of that
            size); from :func:`h3cupy.quantize_minimax_h3_o_weight_nvfp4`.
        o_weight_global_scale: the weight's NVFP4 global scale, a positive float or a
            one-element fp32 device array (required).
        act_global_scale: one-element fp32 device array (``[1]``), read on the device (no host
            sync).
        gate, gate_index, residual, out: as :func:`minimax_h3_fp8_out_proj`.
        act_q, act_sf: optional workspaces, uint8 ``[M, 3584]`` codes and ``[M, 448]`` linear
            scales of attn_out (FlashInfer's ``fp4_quantize`` with linear scales).
        workspace_a, workspace_w: optional bf16 ``[M, 7168]`` and ``[5376, 7168]`` workspaces of
            the sm_90a path (the dequantized operands); unused elsewhere.

    Returns:
        ``out`` = ``bf16(residual + bf16(gate[i] * o))``, ``o = bf16(acc * alpha)``,
        ``alpha = 1 / (act_global_scale * o_weight_global_scale)`` formed on the device.

    sm_120a: two launches (NVFP4 quantization of attn_out, then the block-scaled
    ``kind::mxf4nvf4`` GEMM with the gated-residual epilogue; compile-checked only). sm_90a: by
    default the Hopper path: w' = e2m1 * sf dequantized to bf16 (exact), then the bf16 wgmma
    engine with ``o = bf16(acc * alpha)`` and the gated residual, whose launch also quantizes
    attn_out (act_q, act_sf) and writes a' = e2m1 * sf_a for its own A operand, row by row
    ahead of the tiles (:data:`NVFP4_FUSED_QUANT`; False: the quantization and a' as launches
    of their own); :data:`NVFP4_HOPPER_DEFAULT`. With :data:`BACKEND` = ``"mma"``: the
    in-register emulation of the block-scaled MMA (correct, slow). No host sync; with ``out``
    and every workspace supplied, no allocation (the single launch's ready counters live in
    scratch of the op's own, one word per 128 rows, made on the first call per stream).
    """
    from ..core import tma
    from ..weights import _fp4_quantize_launch

    at, dev, m = _check_attn_out(attn_out)
    wq, wsf, gw_host, gw_t, ga = gemm.check_nvfp4_weight(
        o_weight_q, o_weight_sf, o_weight_global_scale, act_global_scale, "o_weight", D, ATTN, dev
    )
    gt, rows, gstride, it, rt = _check_gated(gate, gate_index, residual, m, dev)

    ot = checks.output_or_empty(out, "out", "bf16", (m, D), at)
    aq = checks.output_or_empty(act_q, "act_q", "uint8", (m, ATTN // 2), at)
    asf = checks.output_or_empty(act_sf, "act_sf", "uint8", (m, ATTN // 16), at)
    target = arch.device_target(dev)
    if target not in ("sm_90a", "sm_120a"):
        raise RuntimeError(
            f"minimax_h3_nvfp4_out_proj runs on sm_120a and sm_90a in this version; this GPU is "
            f"{target}"
        )
    backend = nvfp4_backend(target)
    a_bf = w_bf = None
    if backend == "wgmma":
        a_bf = checks.output_or_empty(workspace_a, "workspace_a", "bf16", (m, ATTN), at)
        w_bf = checks.output_or_empty(workspace_w, "workspace_w", "bf16", (D, ATTN), at)
    checks.check_disjoint(
        checks.given(
            ("out", "act_q", "act_sf", "workspace_a", "workspace_w"),
            (out, act_q, act_sf, workspace_a, workspace_w),
            (ot, aq, asf, a_bf, w_bf),
        ),
        [
            ("attn_out", at),
            ("o_weight_q", wq),
            ("o_weight_sf", wsf),
            ("o_weight_global_scale", gw_t),
            ("act_global_scale", ga),
            ("gate", gt),
            ("gate_index", it),
            ("residual", rt),
        ],
        OUT_ALIASES,
    )
    fused = backend == "wgmma" and NVFP4_FUSED_QUANT
    if not fused:
        # Launch 1: NVFP4 of attn_out under the device global scale (linear scales).
        _fp4_quantize_launch(at, ga, aq, asf, False)
    if backend == "wgmma":
        _nvfp4_wg(
            aq,
            asf,
            wq,
            wsf,
            ga,
            gw_t,
            gw_host,
            rt,
            gt,
            gstride,
            rows,
            it,
            ot,
            a_bf,
            w_bf,
            at if fused else None,
        )
        return interop.export(ot)
    # Launch 2: the NVFP4 GEMM with the gated-residual epilogue.
    kh = ATTN // 2
    kernel = jit.get_kernel(OUT_PROJ, "h3::out_proj_nvfp4_smxx", target)
    tiles = -(-m // 128) * -(-D // 256)
    launch(
        kernel,
        min(tiles, arch.sm_count(dev)),
        256,
        (
            *gemm.nv_maps(aq.ptr, wq.ptr, kh, m, D),
            tma.encode_2d(asf.ptr, "uint8", ATTN // 16, m, ATTN // 16, 16, 128),
            ptr(wsf),
            i32(ATTN // 64),
            i32(m),
            i32(D),
            i32(kh),
            ptr(ga),
            ptr(gw_t),
            np.float32(gw_host),
            *gated_args(rt, gt, gstride, rows, it),
            ptr(ot),
        ),
        tensors=[t for t in (aq, asf, wq, wsf, ga, gw_t, rt, gt, it, ot) if t is not None],
        smem=gemm.nv_smem(gemm.NV_SM120),
    )
    return interop.export(ot)


def _nvfp4_wg(aq, asf, wq, wsf, ga, gw_t, gw_host, rt, gt, gstride, rows, it, ot, a_bf, w_bf, src):
    """The Hopper path's launches after the quantization: w' (and, when ``src`` is None, a')
    dequantized to exact bf16, then the bf16 engine with ``o = bf16(acc * alpha)`` and the gated
    residual. ``src``: attn_out, which the single-launch form quantizes in the GEMM launch into
    act_q, act_sf and a' (NVFP4_FUSED_QUANT); its ready counters are the op's scratch, zeroed
    by a memset on the stream first."""
    from ..core import workspace
    from ..core.interop import current_stream_ptr
    from ..core.launch import stream

    dev, m = aq.device, aq.shape[0]
    fused = src is not None
    tile_n, cluster = gemm.nvfp4_bf16_tile(m, D, True)
    tag = "_fused" if fused else ""
    if tile_n == 224:
        name = f"h3::out_proj_nvfp4_wg{tag}_n224_x2_sm90"
    else:
        name = f"h3::out_proj_nvfp4_wg{tag}{'_x2' if cluster == 2 else ''}_sm90"
    kernel = jit.get_kernel(OUT_PROJ, name, arch.device_target(dev))
    words = None
    if fused:
        words = workspace.scratch_words(dev, current_stream_ptr([src]), -(-m // 128))
        with stream([src]):
            words[: -(-m // 128)].fill(0)
    desc_a, desc_b, _, _ = gemm.nvfp4_bf16_operands(
        aq, asf, wq, wsf, a_bf, w_bf, wave_tile=True, dequant_a=not fused
    )
    if tile_n == 224:
        desc_out = gemm._c_map_w32(ot.ptr, D, m)
    else:
        desc_out = gemm._tensor_map(ot.ptr, "bfloat16", D, m, D * 2, 64)
    smem = gemm.wgmma_smem_bytes(tile_n)
    launch(
        kernel,
        gemm.engine_grid(kernel, m, D, tile_n, cluster, smem, dev),
        384,
        (
            desc_a,
            desc_b,
            desc_out,
            i32(m),
            i32(D),
            i32(ATTN * 2),
            ptr(ga),
            ptr(gw_t),
            np.float32(gw_host),
            *gated_args(rt, gt, gstride, rows, it),
            *((ptr(src), ptr(aq), ptr(asf), ptr(a_bf), np.uint64(words.data.ptr)) if fused else ()),
        ),
        tensors=[a_bf, w_bf, ga, rt, gt, it, ot]
        + ([gw_t] if gw_t is not None else [])
        + ([src, aq, asf] if fused else []),
        smem=smem,
    )
