"""Host reference of the shared prologue (SPEC.md §2): RMSNorm + indexed AdaLN, and its FP8 /
NVFP4 quantized forms."""

from __future__ import annotations

import numpy as np

from h3cupy.formats import bf16_round, fp8_quantize_per_token, nvfp4_quantize
from h3cupy.reference._common import (
    ROW_CHUNK,
    as_f32,
    index_mask,
    rms_normalize,
    round_sum_f32,
    scalar_f32,
)

__all__ = ["prologue", "prologue_fp8", "prologue_nvfp4"]


def prologue(
    x: np.ndarray,
    x_norm_weight: np.ndarray,
    adaln_scale: np.ndarray,
    adaln_shift: np.ndarray,
    adaln_index: np.ndarray,
    eps: float = 1e-5,
) -> np.ndarray:
    """RMSNorm + indexed AdaLN (SPEC.md §2), one row at a time in float32/float64.

    For row m with ``i = adaln_index[m]``::

        rstd = fp32(1 / sqrt(sum_k x_k^2 / K + eps))      # float64 sum of squares
        n_k  = bf16(fp32(fp32(x_k * rstd) * w_k))
        s1_k = bf16(fp32(scale[i, k] + 1))
        a_k  = bf16(fma_fp32(n_k, s1_k, shift[i, k]))    # exact product, one fp32 rounding
        a    = 0 for the whole row when i is outside [0, rows)

    Args:
        x: ``[M, K]`` bf16 values (bfloat16 or float32), K any positive width (16 | K for NVFP4).
        x_norm_weight: ``[K]`` bf16 values.
        adaln_scale, adaln_shift: ``[rows, K]`` bf16 tables sharing ``rows``; strided views (column
            chunks of a ``[rows, 6*K]`` projection) are used as they are.
        adaln_index: int32/int64 ``[M]``; invalid entries give a zero row.
        eps: RMSNorm epsilon.

    Returns:
        float32 ``[M, K]`` holding bf16 values.
    """
    x = np.asarray(x)
    if x.ndim != 2:
        raise ValueError(f"x: expected [M, K], got shape {x.shape}")
    m, k = x.shape
    w = as_f32(x_norm_weight)
    scale = np.asarray(adaln_scale)
    shift = np.asarray(adaln_shift)
    if w.shape != (k,):
        raise ValueError(f"x_norm_weight: expected [{k}], got {w.shape}")
    if scale.ndim != 2 or scale.shape[1] != k or shift.shape != scale.shape:
        raise ValueError(
            f"adaln_scale/adaln_shift: expected two [rows, {k}] tables, got {scale.shape} and "
            f"{shift.shape}"
        )
    valid, safe = index_mask(adaln_index, scale.shape[0], m, "adaln_index")
    # s1 is a per-table-row quantity: compute it once for the (few) table rows.
    s1_table = bf16_round(as_f32(scale) + np.float32(1.0))
    shift_table = as_f32(shift)
    out = np.zeros((m, k), dtype=np.float32)
    for start in range(0, m, ROW_CHUNK):
        rows = slice(start, min(start + ROW_CHUNK, m))
        n = rms_normalize(as_f32(x[rows]), w, eps)
        s1 = s1_table[safe[rows]].astype(np.float64)
        sh = shift_table[safe[rows]].astype(np.float64)
        a = bf16_round(round_sum_f32(n.astype(np.float64) * s1, sh))
        out[rows] = np.where(valid[rows, None], a, np.float32(0.0))
    return out


def prologue_fp8(
    x: np.ndarray,
    x_norm_weight: np.ndarray,
    adaln_scale: np.ndarray,
    adaln_shift: np.ndarray,
    adaln_index: np.ndarray,
    eps: float = 1e-5,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`prologue` followed by per-token FP8 (SPEC.md §1, true fp32 divisions).

    Returns:
        ``(a, codes, scale)``: float32 ``[M, K]`` bf16 values, uint8 e4m3 ``[M, K]``, float32
        ``[M]``. Invalid-index rows have ``scale = fp32(1e-12) / 448`` and zero codes.
    """
    a = prologue(x, x_norm_weight, adaln_scale, adaln_shift, adaln_index, eps)
    codes, scale = fp8_quantize_per_token(a)
    return a, codes, scale


def prologue_nvfp4(
    x: np.ndarray,
    x_norm_weight: np.ndarray,
    adaln_scale: np.ndarray,
    adaln_shift: np.ndarray,
    adaln_index: np.ndarray,
    act_global_scale: np.ndarray | float,
    eps: float = 1e-5,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`prologue` followed by NVFP4 (SPEC.md §1 block recipe, global scale
    ``act_global_scale``, linear scales).

    Returns:
        ``(a, packed, sf)``: float32 ``[M, K]`` bf16 values, uint8 ``[M, K/2]``, uint8
        ``[M, K/16]``.
    """
    a = prologue(x, x_norm_weight, adaln_scale, adaln_shift, adaln_index, eps)
    packed, sf = nvfp4_quantize(a, scalar_f32(act_global_scale, "act_global_scale"))
    return a, packed, sf
