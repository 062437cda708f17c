"""Host references of the attention output projection with the gated residual (SPEC.md §5)."""

from __future__ import annotations

import numpy as np

from h3cupy.formats import fp8_quantize_per_token, nvfp4_quantize
from h3cupy.reference._common import (
    fp8_linear,
    gated_residual,
    nvfp4_alpha,
    nvfp4_linear,
    scalar_f32,
)

__all__ = ["minimax_h3_fp8_out_proj", "minimax_h3_nvfp4_out_proj"]


def minimax_h3_fp8_out_proj(
    attn_out: np.ndarray,
    o_weight_q: np.ndarray,
    o_weight_scale: np.ndarray,
    gate: np.ndarray,
    gate_index: np.ndarray,
    residual: np.ndarray,
    *,
    act_q: np.ndarray | None = None,
    act_scale: np.ndarray | None = None,
) -> np.ndarray:
    """Host reference of ``minimax_h3_fp8_out_proj`` (SPEC.md §5, W8A8).

    Args:
        attn_out: bf16 ``[M, K]`` (production K = 7168, column ``h*128 + d``).
        o_weight_q: uint8 e4m3 ``[N, K]``; o_weight_scale: float32 ``[N]`` (production N = 5376).
        gate: bf16 ``[rows, N]`` table (strided views allowed); gate_index: int32/int64 ``[M]``.
        residual: bf16 ``[M, N]``.
        act_q, act_scale: optional uint8 ``[M, K]`` / float32 ``[M]`` quantized ``attn_out`` to
            consume instead of the host per-token FP8 (the kernel's own workspace).

    Returns:
        float32 ``[M, N]`` bf16 values: ``bf16(residual + bf16(gate[i] * o))`` with
        ``o = bf16(fp32(fp32(acc) * act_scale[m]) * w_scale[n])``; rows with an invalid index are
        ``residual`` exactly.
    """
    if act_q is None:
        act_q, act_scale = fp8_quantize_per_token(attn_out)
    elif act_scale is None:
        raise ValueError("act_scale: required together with act_q")
    o = fp8_linear(act_q, act_scale, o_weight_q, o_weight_scale)
    return gated_residual(o, gate, gate_index, residual)


def minimax_h3_nvfp4_out_proj(
    attn_out: np.ndarray,
    o_weight_q: np.ndarray,
    o_weight_sf: np.ndarray,
    o_weight_global_scale: object,
    act_global_scale: object,
    gate: np.ndarray,
    gate_index: np.ndarray,
    residual: np.ndarray,
    *,
    act_q: np.ndarray | None = None,
    act_sf: np.ndarray | None = None,
) -> np.ndarray:
    """Host reference of ``minimax_h3_nvfp4_out_proj`` (SPEC.md §5, W4A4).

    Args:
        attn_out: bf16 ``[M, K]``.
        o_weight_q: uint8 ``[N, K/2]``; o_weight_sf: flat 128x4-swizzled ue4m3 scales of
            ``[N, K/16]``; o_weight_global_scale: fp32 scalar.
        act_global_scale: fp32 scalar g of the ``attn_out`` quantization (blocks of 16 along K).
        gate, gate_index, residual: as :func:`minimax_h3_fp8_out_proj`.
        act_q, act_sf: optional uint8 ``[M, K/2]`` / ``[M, K/16]`` (linear) quantized ``attn_out``.

    Returns:
        float32 ``[M, N]`` bf16 values; ``o = bf16(fp32(acc) * alpha)``,
        ``alpha = fp32(1 / fp32(act_global_scale * o_weight_global_scale))``.
    """
    if act_q is None:
        act_q, act_sf = nvfp4_quantize(attn_out, scalar_f32(act_global_scale, "act_global_scale"))
    elif act_sf is None:
        raise ValueError("act_sf: required together with act_q")
    alpha = nvfp4_alpha(act_global_scale, o_weight_global_scale)
    o = nvfp4_linear(act_q, act_sf, o_weight_q, o_weight_sf, alpha)
    return gated_residual(o, gate, gate_index, residual)
