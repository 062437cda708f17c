"""The BF16 pre-attention, FP8 out_proj and MLP defaults under compute-sanitizer memcheck, at an
M where the single-launch forms' spare producer warps write rows too (past the first round's
rows, which the consumer warps take), and every persistent CTA runs several tiles:

    compute-sanitizer --tool memcheck --report-api-errors no python3 scripts/memcheck_ops.py
    (optionally --bf16 or --fp8 after it)

the BF16 pre-attention in its single-launch form (the default since session 25; at M = 3000 the
consumer warps write rows 0..2047 of a, the spare producer warps the rest) and its two-launch
form (``--bf16``: those two only), the out_proj in its single-launch and two-launch forms and
the MLP (three launches, y quantized inside FC2's launch), at M = 3000 (24 row tiles; the
out_proj's first round reads rows 0..1023). ``--fp8``: the FP8 pre-attention's single launch
only (pre_attention.FP8_FUSED_PROLOGUE). ``--mlp``: the MLP with FC1's single launch
(mlp.FC1_FUSED_PROLOGUE) and without it. ``--clusters`` (session 31): at M = 2900 (23 row
tiles: the last cluster's second tile lies past M) the FP8 out_proj in both forms and the MLP
in clusters of two (gemm.FP8_OPS_CLUSTER2_FROM_M lowered to M), and the FP8 pre-attention's
single launch in clusters (pre_attention.FP8_PAIR_CLUSTER = 2), 3 out modes. ``--nvfp4``: the
NVFP4 out_proj's Hopper path in both forms (also part of the default run) and the NVFP4
pre-attention's Hopper path. See
memcheck_gemm.py for --report-api-errors.
"""

from __future__ import annotations

import sys

import cupy
import numpy as np

from h3cupy import formats, weights
from h3cupy.ops import mlp, out_proj, pre_attention
from h3cupy.reference import inputs
from h3cupy.verify import mlp_fp8_operands

# the pre-attention ops' out modes with their per-kind scalars (any positive values: the
# sanitizers check memory accesses, not results)
OUT_MODES = (
    ("bf16", {}),
    ("e4m3", dict(q_descale=0.05, k_descale=0.05, v_descale=0.05)),
    ("nvfp4", dict(q_global_scale=500.0, k_global_scale=500.0, v_global_scale=500.0)),
)


def fp8_pre_attention_single_launch(m: int, rng) -> None:
    """The FP8 pre-attention with its prologue inside the GEMM launch
    (pre_attention.FP8_FUSED_PROLOGUE, session 26; at M = 3000 the consumer warps write rows
    0..1023 of act_q, the spare producer warps the rest), every out mode."""
    host = inputs.pre_attention_inputs(m, rows=9, index_dtype=np.int32, rng=rng)
    wq, wsc = formats.fp8_quantize_per_channel(host["qkv_weight"])
    keys = inputs.QUANT_PRE_ATTENTION_KEYS
    dev = {k: cupy.asarray(host[k]) for k in keys}
    default = pre_attention.FP8_FUSED_PROLOGUE
    pre_attention.FP8_FUSED_PROLOGUE = True
    try:
        for out_mode, kw in OUT_MODES:
            pre_attention.minimax_h3_fp8_pre_attention(
                *(dev[k] for k in keys[:5]),
                cupy.asarray(wq),
                cupy.asarray(wsc),
                *(dev[k] for k in keys[5:]),
                out_mode=out_mode,
                **kw,
            )
    finally:
        pre_attention.FP8_FUSED_PROLOGUE = default


def out_proj_and_mlp(m: int, rng) -> None:
    """The FP8 out_proj in its single-launch and two-launch forms, then the MLP (its default)."""
    host = inputs.out_proj_inputs(m, rows=9, rng=rng)
    wq, wsc = formats.fp8_quantize_per_channel(host["o_weight"])
    args = [cupy.asarray(host["attn_out"]), cupy.asarray(wq), cupy.asarray(wsc)]
    args += [cupy.asarray(host[x]) for x in ("gate", "gate_index", "residual")]
    for fused in (True, False):
        out_proj.FUSED_QUANT = fused
        out_proj.minimax_h3_fp8_out_proj(*args)
    out_proj.FUSED_QUANT = True
    _, _, dev, weights = mlp_fp8_operands(m, rng)
    mlp.minimax_h3_mlp_fp8_sm120(*dev.values(), *weights)


def nvfp4_out_proj(m: int, rng) -> None:
    """The NVFP4 out_proj's Hopper path in its single-launch form (out_proj.NVFP4_FUSED_QUANT,
    session 45: attn_out's codes, scales and a' written inside the GEMM launch; at M = 3000 the
    consumer warps write rows 0..1023, the spare producer warps the rest) and its two-launch
    form, at M (n224 tiles in clusters of two) and at M = 200 (128-column tiles alone)."""
    default = out_proj.NVFP4_FUSED_QUANT
    try:
        for rows in (m, 200):
            host = inputs.out_proj_inputs(rows, rows=9, rng=rng)
            wq, wsf, gw = weights.quantize_minimax_h3_o_weight_nvfp4(cupy.asarray(host["o_weight"]))
            amax = float(np.abs(host["attn_out"].astype(np.float32)).max())
            ga = cupy.asarray(np.array([formats.nvfp4_global_scale_from_amax(amax)], np.float32))
            args = [cupy.asarray(host["attn_out"]), wq, wsf, gw, ga]
            args += [cupy.asarray(host[x]) for x in ("gate", "gate_index", "residual")]
            for fused in (True, False):
                out_proj.NVFP4_FUSED_QUANT = fused
                out_proj.minimax_h3_nvfp4_out_proj(*args)
    finally:
        out_proj.NVFP4_FUSED_QUANT = default


def nvfp4_pre_attention(m: int, rng) -> None:
    """The NVFP4 pre-attention's Hopper path (the prologue's codes, a' and w', the bf16 engine),
    every out mode, at M (128 x 256 tiles in clusters of two) and at M = 200 (128-column tiles
    alone); the weight quantized on the device (weights.quantize_minimax_h3_qkv_weight_nvfp4)."""
    ga = cupy.asarray(np.array([4.0], np.float32))  # (any positive scale: codes are not checked)
    keys = inputs.QUANT_PRE_ATTENTION_KEYS
    for rows in (m, 200):
        host = inputs.pre_attention_inputs(rows, rows=9, index_dtype=np.int32, rng=rng)
        wq, wsf, gw = weights.quantize_minimax_h3_qkv_weight_nvfp4(cupy.asarray(host["qkv_weight"]))
        dev = {k: cupy.asarray(host[k]) for k in keys}
        for out_mode, kw in OUT_MODES:
            pre_attention.minimax_h3_nvfp4_pre_attention(
                *(dev[k] for k in keys[:5]),
                wq,
                wsf,
                gw,
                ga,
                *(dev[k] for k in keys[5:]),
                out_mode=out_mode,
                **kw,
            )


def clustered(m: int, rng) -> None:
    """The FP8 out_proj (single launch and two launches) and the MLP on clusters of two, and the
    FP8 pre-attention's single launch in clusters, every out mode (``--clusters``)."""
    from h3cupy.ops import gemm

    old = gemm.FP8_OPS_CLUSTER2_FROM_M, pre_attention.FP8_PAIR_CLUSTER
    gemm.FP8_OPS_CLUSTER2_FROM_M, pre_attention.FP8_PAIR_CLUSTER = m, 2
    try:
        out_proj_and_mlp(m, rng)
        fp8_pre_attention_single_launch(m, rng)
    finally:
        gemm.FP8_OPS_CLUSTER2_FROM_M, pre_attention.FP8_PAIR_CLUSTER = old


def mlp_fc1_single_launch(m: int, rng) -> None:
    """The MLP with FC1's prologue inside its launch (mlp.FC1_FUSED_PROLOGUE, session 27; at
    M = 3000 the consumer warps write rows 0..1023 of a_q, the spare producer warps the rest),
    then with the prologue launch, each with the caller's workspace_flags."""
    _, _, dev, weights = mlp_fp8_operands(m, rng)
    args = [*dev.values(), *weights]
    default = mlp.FC1_FUSED_PROLOGUE
    try:
        for fused in (True, False):
            mlp.FC1_FUSED_PROLOGUE = fused
            flags = cupy.zeros(mlp.minimax_h3_mlp_fc2_flags_sm120(m), np.int32)
            mlp.minimax_h3_mlp_fp8_sm120(*args, workspace_flags=flags)
    finally:
        mlp.FC1_FUSED_PROLOGUE = default


def main() -> None:
    rng = np.random.default_rng(0)
    m = 3000
    if "--fp8" in sys.argv[1:]:
        fp8_pre_attention_single_launch(m, rng)
        cupy.cuda.Device().synchronize()
        print(f"memcheck_ops: the FP8 pre-attention's single launch, 3 out modes at M = {m}")
        return
    if "--clusters" in sys.argv[1:]:
        m = 2900
        clustered(m, rng)
        cupy.cuda.Device().synchronize()
        print(f"memcheck_ops: the out_proj, MLP and FP8 pre-attention in clusters at M = {m}")
        return
    if "--nvfp4" in sys.argv[1:]:
        nvfp4_out_proj(m, rng)
        nvfp4_pre_attention(m, rng)
        cupy.cuda.Device().synchronize()
        print(
            f"memcheck_ops: the NVFP4 out_proj's two forms and the NVFP4 pre-attention "
            f"at M = {m} and 200"
        )
        return
    if "--mlp" in sys.argv[1:]:
        mlp_fc1_single_launch(m, rng)
        cupy.cuda.Device().synchronize()
        print(f"memcheck_ops: the MLP with FC1's single launch and with the prologue at M = {m}")
        return
    host = inputs.pre_attention_inputs(m, rows=9, rng=rng)
    out = cupy.empty((8, m, 56 // 8, 3, 128), formats.BF16)
    default = pre_attention.BF16_FUSED_PROLOGUE
    for fused in (True, False):
        pre_attention.BF16_FUSED_PROLOGUE = fused
        pre_attention.minimax_h3_bf16_pre_attention(
            *(cupy.asarray(host[x]) for x in inputs.PRE_ATTENTION_KEYS), ulysses_degree=8, out=out
        )
    pre_attention.BF16_FUSED_PROLOGUE = default
    if "--bf16" in sys.argv[1:]:
        cupy.cuda.Device().synchronize()
        print(f"memcheck_ops: 2 BF16 paths run at M = {m}")
        return
    out_proj_and_mlp(m, rng)
    nvfp4_out_proj(m, rng)
    cupy.cuda.Device().synchronize()
    print(f"memcheck_ops: 9 paths run at M = {m} (the NVFP4 out_proj's also at 200)")


if __name__ == "__main__":
    main()
