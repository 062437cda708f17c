"""Host reference of the fused FP8 MLP block (SPEC.md §6, seed minimax_h3_mlp_fp8_sm120.txt)."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from h3cupy.formats import bf16_round, fc1_unpack_rows, fp8_quantize_per_token
from h3cupy.reference._common import as_f32, fp8_linear, gated_residual
from h3cupy.reference.prologue import prologue

__all__ = ["MlpOutput", "minimax_h3_mlp_fp8_sm120", "swiglu"]


class MlpOutput(NamedTuple):
    """Outputs of :func:`minimax_h3_mlp_fp8_sm120`.

    ``out``: float32 ``[M, D]`` bf16 values; ``y``: float32 ``[M, ffn]`` bf16 values (SwiGLU);
    ``y_q``: uint8 e4m3 ``[M, ffn]`` and ``y_scale``: float32 ``[M]``, the FP8 operand of FC2.
    """

    out: np.ndarray
    y: np.ndarray
    y_q: np.ndarray
    y_scale: np.ndarray


def swiglu(h: np.ndarray) -> np.ndarray:
    """``y = bf16(bf16(silu(h_gate)) * h_up)`` on natural-order FC1 outputs.

    silu is evaluated in float64 as ``t / (1 + exp(-t))``, rounded to fp32 then bf16; the
    bf16 x bf16 product is exact in fp32 before its bf16 rounding.

    Args:
        h: float32 ``[M, 2*ffn]`` bf16 values, gate columns ``[0, ffn)`` then up columns.

    Returns:
        float32 ``[M, ffn]`` holding bf16 values.
    """
    h = as_f32(h)
    ffn = h.shape[1] // 2
    t = h[:, :ffn].astype(np.float64)
    with np.errstate(over="ignore"):
        silu = bf16_round(t / (1.0 + np.exp(-t)))
    return bf16_round(silu * h[:, ffn:])


def minimax_h3_mlp_fp8_sm120(
    x: np.ndarray,
    x_norm_weight: np.ndarray,
    adaln_scale: np.ndarray,
    adaln_shift: np.ndarray,
    adaln_index: np.ndarray,
    gate: np.ndarray,
    residual: np.ndarray,
    fc1_weight_q: np.ndarray,
    fc1_weight_scale: np.ndarray,
    fc2_weight_q: np.ndarray,
    fc2_weight_scale: np.ndarray,
    *,
    eps: float = 1e-5,
    a_q: np.ndarray | None = None,
    a_scale: np.ndarray | None = None,
    y_q: np.ndarray | None = None,
    y_scale: np.ndarray | None = None,
) -> MlpOutput:
    """Host reference of ``minimax_h3_mlp_fp8_sm120`` (the seed's formula block)::

        a        = prologue(x; adaln_scale, adaln_shift, adaln_index)        # 0 on invalid rows
        a_q, s_a = per-token FP8 of a                                         # true division
        h        = bf16(fp32(fp32(a_q @ W1^T) * s_a) * w1_scale)             # [M, 2*ffn]
        y        = bf16(bf16(silu(h_gate)) * h_up)                            # [M, ffn]
        y_q, s_y = per-token FP8 of y                                         # true division
        o        = bf16(fp32(fp32(y_q @ W2^T) * s_y) * w2_scale)             # [M, D]
        out      = bf16(residual + bf16(gate[i] * o));  out = residual on invalid rows (select)

    GEMMs accumulate in float64 (exact products).

    Args:
        x: bf16 ``[M, D]``; x_norm_weight: bf16 ``[D]``.
        adaln_scale, adaln_shift, gate: bf16 ``[rows, D]`` tables sharing ``rows`` (strided views).
        adaln_index: int32/int64 ``[M]``.
        residual: bf16 ``[M, D]``.
        fc1_weight_q: uint8 e4m3 ``[2*ffn, D]`` and fc1_weight_scale float32 ``[2*ffn]`` in the
            PREPACKED row order (from ``prepare_minimax_h3_fc1_weight_fp8``).
        fc2_weight_q: uint8 e4m3 ``[D, ffn]``; fc2_weight_scale: float32 ``[D]``.
        eps: RMSNorm epsilon.
        a_q, a_scale: optional uint8 ``[M, D]`` / float32 ``[M]`` to use instead of quantizing
            ``a``.
        y_q, y_scale: optional uint8 ``[M, ffn]`` / float32 ``[M]`` FC2 operand to use instead of
            quantizing the reference ``y`` (``y`` itself is still the reference's).

    Returns:
        :class:`MlpOutput` ``(out, y, y_q, y_scale)``.
    """
    gate = np.asarray(gate)
    if gate.shape[0] != np.asarray(adaln_scale).shape[0]:
        raise ValueError(
            f"gate: expected the AdaLN tables' row count {np.asarray(adaln_scale).shape[0]}, "
            f"got {gate.shape}"
        )
    if a_q is None:
        a = prologue(x, x_norm_weight, adaln_scale, adaln_shift, adaln_index, eps)
        a_q, a_scale = fp8_quantize_per_token(a)
    elif a_scale is None:
        raise ValueError("a_scale: required together with a_q")
    w1_q = fc1_unpack_rows(np.asarray(fc1_weight_q, dtype=np.uint8))
    w1_s = fc1_unpack_rows(as_f32(fc1_weight_scale))
    h = fp8_linear(a_q, a_scale, w1_q, w1_s)
    y = swiglu(h)
    if y_q is None:
        y_q, y_scale = fp8_quantize_per_token(y)
    elif y_scale is None:
        raise ValueError("y_scale: required together with y_q")
    o = fp8_linear(y_q, y_scale, fc2_weight_q, fc2_weight_scale)
    out = gated_residual(o, gate, adaln_index, residual)
    return MlpOutput(out, y, np.asarray(y_q, dtype=np.uint8), as_f32(y_scale))
