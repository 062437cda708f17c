"""``minimax_h3_mlp_fp8_sm120`` (SPEC.md §6): the FP8 MLP block of MiniMax-H3.

    a        = prologue(x; adaln_scale, adaln_shift, adaln_index)       (0 on invalid rows)
    a_q, s_a = per-token FP8 of a                                        (true division)
    h        = bf16((acc1 * s_a[m]) * w1_scale[n])                       (prepacked FC1 rows)
    y        = bf16(bf16(silu(h_gate)) * h_up)                           [M, 14336]
    y_q, s_y = per-token FP8 of y                                        (true division)
    o        = bf16((acc2 * s_y[m]) * w2_scale[n])
    out      = bf16(residual + bf16(gate[i] * o)),  out = residual on invalid rows

Three launches by default: the prologue (FP8), FC1 with the SwiGLU epilogue
(``cuda_src/kernels/mlp.cu``), and FC2 with the gated-residual epilogue (``out_proj.cu``), which
quantizes y inside its own launch (consumer warps for the first round's rows, spare producer
warps for the rest) and publishes it per 128-row tile through the ``workspace_flags`` counters,
as the seed describes. With ``h3cupy.ops.mlp.FUSED_QUANT = False`` the per-token FP8 of y is a
launch of its own (four launches). H200-verified both ways; the three launches are the default
since session 17: level at M = 4824 / 9648 and 1-5% faster at 19296 / 38592 in five same-run
measurements (benchmarks/NOTES.md, session 17; session 7 had measured them 3% slower at 38592).
"""

from __future__ import annotations

from ..core import arch, checks, interop, jit
from ..core.launch import i32, launch, ptr, stream
from . import gemm, out_proj
from .pre_attention import _out_map
from .prologue import D, check_prologue_inputs, in_launch_args, launch_prologue, prologue_reads

FFN = 14336
MLP = jit.ModuleSpec(
    "kernels/mlp.cu",
    (
        "h3::mlp_fc1_fp8_x2_sm90",
        "h3::mlp_fc1_fp8_sm90",
        "h3::mlp_fc1_fp8_n192_sm90",
        "h3::mlp_fc1_fp8_n192_fused_sm90",
        "h3::mlp_fc1_fp8_mma_smxx<1>",
        "h3::mlp_fc1_fp8_mma_smxx<2>",
    ),
)
FP8_MMA_FORMS = arch.FP8_MMA_FORMS


#: True (default since session 17): FC2 quantizes y inside its launch (three launches); False:
#: y's per-token FP8 is a launch of its own (four). Read on the wgmma back end only.
FUSED_QUANT = True
#: FC1 with the prologue inside its launch (session 27; opt-in until measured): on sm_90a at
#: M > 256 where :func:`h3cupy.ops.gemm.fp8_ops_cluster` is 1, the FC1 kernel
#: (``mlp_fc1_fp8_n192_fused_sm90``) writes ``a_q`` and ``a_scale`` itself, with the prologue's
#: arithmetic and reduction order (the same bytes), behind per-128-row-tile ready counters kept
#: in ``workspace_flags`` right after FC2's (h3/norm_rows.cuh ``ProNormRows<true>``, as the FP8
#: pre-attention's single launch): one launch fewer (two with :data:`FUSED_QUANT`).
FC1_FUSED_PROLOGUE = False


def _fc1_ready(m: int) -> int:
    """The single-launch FC1's ready counters (words after FC2's in the flags), or 0 where FC1
    keeps the prologue launch (read on the wgmma back end only)."""
    if not FC1_FUSED_PROLOGUE or m <= 256 or gemm.fp8_ops_cluster(m) != 1:
        return 0
    return -(-m // 128)


# SPEC.md §6: ``out`` may be ``residual`` or ``x`` itself (FC2's epilogue reads a row's
# residual before writing it; x is read only by the prologue, launches earlier); any other
# overlap of a written operand is refused (checks.check_disjoint).
OUT_ALIASES = (("out", "residual"), ("out", "x"))


def minimax_h3_mlp_fc2_flags_sm120(m: int) -> int:
    """Length of the int32 ``workspace_flags`` the MLP op expects for ``m`` tokens on the current
    GPU under the current settings: one ready flag per 128-row tile of y (FC2's single-launch
    form), with :data:`FC1_FUSED_PROLOGUE` one per 128-row tile of ``a`` after them, then FC2's
    tail-split counters and partial sums (:data:`h3cupy.ops.gemm.TAIL_SPLIT`; several MB at some
    M). At least ``ceil(m / 128)``."""
    if int(m) < 1:
        raise ValueError(f"m: expected M >= 1, got {m}")
    return out_proj._flags_words(int(m), FFN, FUSED_QUANT, _fc1_ready(int(m)))


@arch.on_operand_device("x")
def minimax_h3_mlp_fp8_sm120(
    x,
    x_norm_weight,
    adaln_scale,
    adaln_shift,
    adaln_index,
    gate,
    residual,
    fc1_weight_q,
    fc1_weight_scale,
    fc2_weight_q,
    fc2_weight_scale,
    *,
    out=None,
    workspace_a_q=None,
    workspace_a_scale=None,
    workspace_y=None,
    workspace_y_q=None,
    workspace_y_scale=None,
    workspace_flags=None,
    eps: float = 1e-5,
    fp8_mma_form: int = -1,
):
    """The W8A8 MLP block (SPEC.md §6).

    Args:
        x: bf16 ``[M, 5376]``; x_norm_weight: bf16 ``[5376]``.
        adaln_scale, adaln_shift, gate: bf16 ``[rows, 5376]`` tables sharing one row count
            (strided column chunks allowed).
        adaln_index: int32 or int64 ``[M]``; an index outside ``[0, rows)`` gives ``a = 0`` and
            ``out = residual`` exactly.
        residual: bf16 ``[M, 5376]``.
        fc1_weight_q, fc1_weight_scale: e4m3 ``[28672, 5376]`` + fp32 ``[28672]`` in the
            prepacked row order (:func:`h3cupy.prepare_minimax_h3_fc1_weight_fp8`).
        fc2_weight_q, fc2_weight_scale: e4m3 ``[5376, 14336]`` + fp32 ``[5376]``
            (:func:`h3cupy.prepare_minimax_h3_fc2_weight_fp8`).
        out: optional bf16 ``[M, 5376]``; may be ``residual`` or ``x`` itself (the same view).
            No output or workspace may otherwise share memory with another operand
            (ValueError naming both).
        workspace_*: optional caller-owned buffers: a_q e4m3 ``[M, 5376]``, a_scale fp32 ``[M]``,
            y bf16 ``[M, 14336]``, y_q e4m3 ``[M, 14336]``, y_scale fp32 ``[M]``, flags int32
            ``[minimax_h3_mlp_fc2_flags_sm120(M)]`` (zeroed by the op).
        eps: RMSNorm epsilon (positive, finite).
        fp8_mma_form: -1 (per board), 0 (legacy e4m3 mma.sync) or 2 (``kind::mxf8f6f4``); selects
            the SM120 instruction form; validated and ignored on sm_90a (wgmma).

    Returns:
        ``out``.

    Runs on sm_90a (the wgmma engine; H200-verified) and sm_120a (the TMA-fed mma.sync back end:
    prologue, FC1 + SwiGLU, the y quantization launch, FC2 + gated residual; compile- and
    SASS-checked, run on the H200 with ``h3cupy.ops.out_proj.BACKEND = "mma"``). No host sync; no
    allocation when ``out`` and every workspace are given (without ``workspace_flags``, FC2's
    ready counters and tail split use scratch of the op's own: per stream, per CUDA-graph
    capture).
    """
    from ..weights import _kernel as quant_kernel

    eps = checks.check_positive_finite(eps, "eps")
    checks.check_choice(fp8_mma_form, "fp8_mma_form", FP8_MMA_FORMS)
    xt, wt, st, ht, it, rows, stride = check_prologue_inputs(
        x, x_norm_weight, adaln_scale, adaln_shift, adaln_index
    )
    dev, m = xt.device, xt.shape[0]
    gt = interop.as_tensor(gate, "gate")
    g_rows, g_stride = checks.check_table(gt, "gate", D, dev)
    if g_rows != rows:
        raise ValueError(
            f"gate: expected the AdaLN tables' row count {rows}, got {g_rows}; pass the gate "
            "chunk of the same modulation projection"
        )
    rt = interop.as_tensor(residual, "residual")
    checks.check_tensor(rt, "residual", "bf16", (m, D), dev)
    w1 = interop.as_tensor(fc1_weight_q, "fc1_weight_q", fp8_as="e4m3")
    checks.check_tensor(w1, "fc1_weight_q", "e4m3", (2 * FFN, D), dev)
    s1 = interop.as_tensor(fc1_weight_scale, "fc1_weight_scale")
    checks.check_tensor(s1, "fc1_weight_scale", "float32", (2 * FFN,), dev)
    w2 = interop.as_tensor(fc2_weight_q, "fc2_weight_q", fp8_as="e4m3")
    checks.check_tensor(w2, "fc2_weight_q", "e4m3", (D, FFN), dev)
    s2 = interop.as_tensor(fc2_weight_scale, "fc2_weight_scale")
    checks.check_tensor(s2, "fc2_weight_scale", "float32", (D,), dev)

    ot = checks.output_or_empty(out, "out", "bf16", (m, D), xt)
    aq = checks.output_or_empty(workspace_a_q, "workspace_a_q", "e4m3", (m, D), xt)
    asc = checks.output_or_empty(workspace_a_scale, "workspace_a_scale", "float32", (m,), xt)
    yt = checks.output_or_empty(workspace_y, "workspace_y", "bf16", (m, FFN), xt)
    yq = checks.output_or_empty(workspace_y_q, "workspace_y_q", "e4m3", (m, FFN), xt)
    ysc = checks.output_or_empty(workspace_y_scale, "workspace_y_scale", "float32", (m,), xt)
    ft = out_proj.check_flags(workspace_flags, xt, m, "minimax_h3_mlp_fc2_flags_sm120")
    names = ("a_q", "a_scale", "y", "y_q", "y_scale", "flags")
    checks.check_disjoint(
        checks.given(
            ("out", *(f"workspace_{n}" for n in names)),
            (
                out,
                workspace_a_q,
                workspace_a_scale,
                workspace_y,
                workspace_y_q,
                workspace_y_scale,
                workspace_flags,
            ),
            (ot, aq, asc, yt, yq, ysc, ft),
        ),
        [
            *prologue_reads(xt, wt, st, ht, it),
            ("gate", gt),
            ("residual", rt),
            ("fc1_weight_q", w1),
            ("fc1_weight_scale", s1),
            ("fc2_weight_q", w2),
            ("fc2_weight_scale", s2),
        ],
        OUT_ALIASES,
    )
    target = arch.device_target(dev)
    if target not in ("sm_90a", "sm_120a"):
        raise RuntimeError(
            f"minimax_h3_mlp_fp8_sm120 runs on sm_90a (H100 / H200) and sm_120a (RTX 5090 / RTX "
            f"PRO 6000) in this version; this GPU is {target}"
        )
    backend = out_proj.gemm_backend(target)

    if backend == "mma":
        # 1. Prologue with per-token FP8 of a; 2-4 on the mma.sync back end.
        launch_prologue(xt, wt, st, ht, it, rows, stride, eps, "fp8", None, aq, asc, None)
        if ft is not None:  # unused there, zeroed as documented
            with stream([xt]):
                ft.raw[: -(-m // 128)].fill(0)
        _mlp_mma(fp8_mma_form, aq, asc, w1, s1, yt, yq, ysc, w2, s2, rt, gt, g_stride, rows, it, ot)
        return interop.export(ot)
    # FC2's plan first: its counters are zeroed (a memset) before the prologue, so that every
    # launch below follows a kernel and the engine's programmatic launches (launch.PDL) overlap
    # the tail of the kernel before them. FC2's workspace: the single-launch form's 128-row
    # ready counters and the tail split's counters and partials, in workspace_flags or the op's
    # scratch.
    # With FC1_FUSED_PROLOGUE, FC1's ready counters follow FC2's (zeroed by the same memset).
    fc1_ready = _fc1_ready(m)
    plan = out_proj.plan_fp8_gemm_wgmma(m, FFN, FUSED_QUANT, dev, fc1_ready)
    buf = gemm.plan_workspace(
        plan.tail, ft, dev, [xt], "minimax_h3_mlp_fc2_flags_sm120", flags=plan.ready + fc1_ready
    )
    extra: tuple = ()
    if fc1_ready:  # the FC1 launch writes a_q and a_scale itself
        extra = in_launch_args(
            xt, wt, st, ht, it, rows, stride, eps, aq, buf.data.ptr + 4 * plan.ready
        )
    else:  # 1. Prologue with per-token FP8 of a.
        launch_prologue(xt, wt, st, ht, it, rows, stride, eps, "fp8", None, aq, asc, None)
    # 2. FC1 with the SwiGLU epilogue -> y.
    # (mirrors mlp.cu: n192 above M = 256, in clusters of gemm.fp8_ops_cluster(m); n128 single
    # CTAs)
    cluster = gemm.fp8_ops_cluster(m)
    tile_n = 192 if m > 256 else 128
    tiles = "" if m <= 256 else "_x2" if cluster == 2 else "_n192"
    fused1 = "_fused" if fc1_ready else ""
    kernel = jit.get_kernel(MLP, f"h3::mlp_fc1_fp8{tiles}{fused1}_sm90", target)
    # the 192-column kernel reads its scales from shared memory (mlp.cu, EpiSwiglu's kVecBytes:
    # 64 row and 192 column floats per warpgroup)
    smem = gemm.wgmma_smem_bytes(tile_n, vec=gemm.scale_vec_bytes(192 if tile_n == 192 else 0))
    launch(
        kernel,
        gemm.engine_grid(kernel, m, 2 * FFN, tile_n, cluster, smem, dev),
        384,
        (
            gemm._tensor_map(aq.ptr, "uint8", D, m, D, 128),
            gemm._tensor_map(w1.ptr, "uint8", D, 2 * FFN, D, tile_n // cluster),
            _out_map(yt.ptr, m, FFN, "bfloat16", 32, 64),  # 32-column boxes, 64B swizzle
            i32(m),
            i32(2 * FFN),
            i32(D),
            ptr(asc),
            ptr(s1),
            *extra,
        ),
        tensors=[aq, asc, w1, s1, yt] + ([xt, wt, st, ht, it] if fc1_ready else []),
        smem=smem,
        pdl=True,
    )
    # 3 + 4. FC2 with the gated-residual epilogue (the out_proj kernels, K = 14336), on the
    # per-token FP8 of y: a launch of its own, or (FUSED_QUANT) inside FC2's launch with the
    # 128-row ready counters.
    if not FUSED_QUANT:
        launch(
            quant_kernel("quantize_rows_fp8_smxx", dev),
            m,
            256,
            (ptr(yt), i32(FFN), ptr(None), ptr(yq), ptr(ysc)),
            tensors=[yt, yq, ysc],
        )
    src = yt if FUSED_QUANT else None
    out_proj.launch_fp8_gemm_wgmma(
        plan, buf, yq, ysc, w2, s2, rt, gt, g_stride, rows, it, ot, m, FFN, src, [yt]
    )
    return interop.export(ot)


def _mlp_mma(form, aq, asc, w1, s1, yt, yq, ysc, w2, s2, rt, gt, g_stride, rows, it, ot) -> None:
    """Launches 2-4 on the mma.sync back end: FC1 + SwiGLU -> y, the per-token FP8 of y, FC2 with
    the gated residual (out_proj's mma kernel, K = 14336)."""
    from ..weights import _kernel as quant_kernel

    dev, m = aq.device, aq.shape[0]
    target = arch.device_target(dev)
    code = arch.fp8_mma_code(form, target, arch.device_name(dev))
    kernel = jit.get_kernel(MLP, f"h3::mlp_fc1_fp8_mma_smxx<{code}>", target)
    launch(
        kernel,
        min(-(-m // 128) * (2 * FFN // 256), arch.sm_count(dev)),
        256,
        (
            *gemm.mt_maps(aq.ptr, w1.ptr, "uint8", D, m, 2 * FFN, gemm.MT_SM120),
            i32(m),
            i32(2 * FFN),
            i32(D),
            ptr(asc),
            ptr(s1),
            ptr(yt),
        ),
        tensors=[aq, asc, w1, s1, yt],
        smem=gemm.mt_smem(gemm.MT_SM120),
    )
    launch(
        quant_kernel("quantize_rows_fp8_smxx", dev),
        m,
        256,
        (ptr(yt), i32(FFN), ptr(None), ptr(yq), ptr(ysc)),
        tensors=[yt, yq, ysc],
    )
    out_proj.launch_fp8_gemm_mma(code, yq, ysc, w2, s2, rt, gt, g_stride, rows, it, ot, m, FFN)
