"""Shared arithmetic of the host references: exact fp32 rounding points, RMSNorm, indexed tables,
float64 GEMMs and the gated residual. NumPy only."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from h3cupy.formats import (
    _as_f32,
    _scalar_f32,
    bf16_round,
    e2m1_decode,
    e4m3_decode,
    ue4m3_decode,
    unpack_e2m1,
    unswizzle_sf_128x4,
)

__all__ = [
    "as_f32",
    "scalar_f32",
    "index_mask",
    "round_sum_f32",
    "rms_normalize",
    "matmul_nt",
    "gated_residual",
    "fp8_linear",
    "nvfp4_rows",
    "nvfp4_alpha",
    "nvfp4_linear",
    "ROW_CHUNK",
]

# Rows per chunk of the row-wise references: bounds host memory at production M.
ROW_CHUNK = 2048
# Weight rows per float64 block of the reference GEMMs.
_GEMM_BLOCK = 2048

as_f32 = _as_f32
scalar_f32 = _scalar_f32


def index_mask(index: np.ndarray, rows: int, m: int, name: str) -> tuple[np.ndarray, np.ndarray]:
    """Validate a table index vector and split it into (valid mask, safe index).

    Args:
        index: int32/int64 ``[M]``; values outside ``[0, rows)`` are invalid (no error).
        rows: the tables' row count.
        m: the expected length M.
        name: argument name for the error message.

    Returns:
        ``(valid bool [M], safe int64 [M])`` where invalid entries of ``safe`` are 0.
    """
    idx = np.asarray(index)
    if idx.shape != (m,) or idx.dtype not in (np.int32, np.int64):
        raise ValueError(f"{name}: expected int32/int64 [{m}], got {idx.dtype} {idx.shape}")
    idx = idx.astype(np.int64, copy=False)
    valid = (idx >= 0) & (idx < rows)
    return valid, np.where(valid, idx, 0)


def round_sum_f32(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """fp32 rounding (RNE, one rounding) of the exact sum ``p + q`` of two float64 arrays.

    The callers pass exact float64 products of bf16/fp32 operands, so this is what an fp32 ``fma``
    (or an exact fp32 product followed by an fp32 add) returns. The float64 sum may round; the
    rounding error is recovered with TwoSum and folded in by rounding to odd, after which the cast
    to fp32 is a correct single rounding (53 >= 24 + 2 bits).
    """
    with np.errstate(invalid="ignore", over="ignore"):
        s = p + q
        b = s - p
        err = (p - (s - b)) + (q - b)
        bits = s.view(np.uint64)
        inexact = (err != 0) & np.isfinite(err) & ((bits & np.uint64(1)) == 0)
        if inexact.any():
            toward = np.where(err > 0, np.inf, -np.inf)
            s = np.where(inexact, np.nextafter(s, toward), s)
        return s.astype(np.float32)


def rms_normalize(r: np.ndarray, weight: np.ndarray, eps: float) -> np.ndarray:
    """RMSNorm over the last axis with the kernels' rounding points (SPEC.md §2, §3 step 3).

    ``rstd = fp32(1 / sqrt(sum(r^2) / n + eps))`` with the sum of squares in float64 (the kernels'
    fp32 reduction order is implementation defined); ``out = bf16(fp32(fp32(r * rstd) * w))``.

    Args:
        r: float32 ``[..., n]`` bf16 values.
        weight: ``[n]`` bf16 values.
        eps: epsilon; rounded to fp32 (the kernels receive an fp32 argument).

    Returns:
        float32 ``[..., n]`` holding bf16 values.
    """
    r = as_f32(r)
    w = as_f32(weight)
    r64 = r.astype(np.float64)
    ss = np.einsum("...k,...k->...", r64, r64)
    eps64 = float(np.float32(eps))
    with np.errstate(invalid="ignore", over="ignore"):  # non-finite rows stay non-finite
        rstd = (1.0 / np.sqrt(ss / r.shape[-1] + eps64)).astype(np.float32)
        return bf16_round((r * rstd[..., None]) * w)


def matmul_nt(
    a: np.ndarray, n_rows: int, weight_rows: Callable[[int, int], np.ndarray]
) -> np.ndarray:
    """``a @ W^T`` in float64, decoding W a block of rows at a time.

    Args:
        a: ``[M, K]`` real array (converted to float64; exact for bf16/fp8/NVFP4 values).
        n_rows: N, the weight row count.
        weight_rows: ``(start, stop) -> [stop - start, K]`` real array of weight rows.

    Returns:
        float64 ``[M, N]``.
    """
    a64 = np.asarray(a, dtype=np.float64)
    out = np.empty((a64.shape[0], n_rows), dtype=np.float64)
    for start in range(0, n_rows, _GEMM_BLOCK):
        stop = min(start + _GEMM_BLOCK, n_rows)
        w = np.asarray(weight_rows(start, stop), dtype=np.float64)
        out[:, start:stop] = a64 @ w.T
    return out


def gated_residual(
    o: np.ndarray, gate: np.ndarray, gate_index: np.ndarray, residual: np.ndarray
) -> np.ndarray:
    """``out = bf16(residual + bf16(gate[i, n] * o))`` with ``out = residual`` exactly (a select)
    on rows whose index is outside ``[0, rows)`` (SPEC.md §5 step 3, §6).

    bf16 x bf16 products are exact in fp32, so the fp32 multiply-then-add has the kernels' rounding
    points whether or not they contract it into an FMA.

    Args:
        o: float32 ``[M, N]`` bf16 values.
        gate: ``[rows, N]`` bf16 table (strided views allowed).
        gate_index: int32/int64 ``[M]``.
        residual: ``[M, N]`` bf16 values.

    Returns:
        float32 ``[M, N]`` holding bf16 values.
    """
    o = as_f32(o)
    m, n = o.shape
    res = as_f32(residual)
    gate = np.asarray(gate)
    if res.shape != (m, n):
        raise ValueError(f"residual: expected [{m}, {n}], got {res.shape}")
    if gate.ndim != 2 or gate.shape[1] != n:
        raise ValueError(f"gate: expected [rows, {n}], got {gate.shape}")
    valid, safe = index_mask(gate_index, gate.shape[0], m, "gate_index")
    gv = as_f32(gate[safe])
    with np.errstate(invalid="ignore", over="ignore"):
        p = bf16_round(gv * o)
        out = bf16_round(res + p)
    return np.where(valid[:, None], out, res)


def fp8_linear(
    act_q: np.ndarray, act_scale: np.ndarray, w_q: np.ndarray, w_scale: np.ndarray
) -> np.ndarray:
    """W8A8 GEMM with per-row x per-column fp32 scales:
    ``bf16(fp32(fp32(acc) * act_scale[m]) * w_scale[n])``, ``acc`` in float64 (exact products).

    Args:
        act_q: uint8 e4m3 ``[M, K]``; act_scale: float32 ``[M]``.
        w_q: uint8 e4m3 ``[N, K]``; w_scale: float32 ``[N]``.

    Returns:
        float32 ``[M, N]`` holding bf16 values.
    """
    act_q = np.asarray(act_q, dtype=np.uint8)
    w_q = np.asarray(w_q, dtype=np.uint8)
    if act_q.ndim != 2 or w_q.ndim != 2 or act_q.shape[1] != w_q.shape[1]:
        raise ValueError(f"fp8 GEMM: act_q {act_q.shape} and weight {w_q.shape} do not match")
    a_s = as_f32(act_scale).reshape(-1)
    w_s = as_f32(w_scale).reshape(-1)
    if a_s.shape != (act_q.shape[0],) or w_s.shape != (w_q.shape[0],):
        raise ValueError(f"fp8 GEMM: scales {a_s.shape}/{w_s.shape} do not match {act_q.shape}")
    acc = matmul_nt(e4m3_decode(act_q), w_q.shape[0], lambda i, j: e4m3_decode(w_q[i:j]))
    return bf16_round((acc.astype(np.float32) * a_s[:, None]) * w_s[None, :])


def nvfp4_rows(packed: np.ndarray, sf: np.ndarray) -> np.ndarray:
    """NVFP4 rows without the global scale: ``code * float(sf)`` (exact in fp32).

    Args:
        packed: uint8 ``[R, K/2]``; sf: uint8 ``[R, K/16]`` linear.

    Returns:
        float32 ``[R, K]``.
    """
    vals = e2m1_decode(unpack_e2m1(packed))
    r, k = vals.shape
    out = vals.reshape(r, k // 16, 16) * ue4m3_decode(sf).reshape(r, k // 16)[..., None]
    return out.reshape(r, k)


def nvfp4_alpha(
    act_global_scale: object, w_global_scale: object, alpha: object = None
) -> np.float32:
    """``alpha = fp32(1 / fp32(g_act * g_w))`` (fp32 math, as formed on the device), or ``alpha``
    rounded to fp32 when given."""
    if alpha is not None:
        return scalar_f32(alpha, "alpha")
    g_act = scalar_f32(act_global_scale, "act_global_scale")
    g_w = scalar_f32(w_global_scale, "weight global scale")
    return np.float32(np.float32(1.0) / np.float32(g_act * g_w))


def nvfp4_linear(
    act_q: np.ndarray,
    act_sf: np.ndarray,
    w_q: np.ndarray,
    w_sf_swizzled: np.ndarray,
    alpha: np.float32,
) -> np.ndarray:
    """Block-scaled NVFP4 GEMM: ``bf16(fp32(acc) * alpha)`` with
    ``acc = sum_k (code_a sf_a)(code_w sf_w)`` in float64 (exact products).

    Args:
        act_q: uint8 ``[M, K/2]``; act_sf: uint8 ``[M, K/16]`` linear.
        w_q: uint8 ``[N, K/2]``; w_sf_swizzled: uint8 flat 128x4-swizzled ``[N, K/16]`` scales.
        alpha: fp32 ``1 / (g_act * g_w)``.

    Returns:
        float32 ``[M, N]`` holding bf16 values.
    """
    act_q = np.asarray(act_q, dtype=np.uint8)
    w_q = np.asarray(w_q, dtype=np.uint8)
    if act_q.ndim != 2 or w_q.ndim != 2 or act_q.shape[1] != w_q.shape[1]:
        raise ValueError(f"nvfp4 GEMM: act_q {act_q.shape} and weight {w_q.shape} do not match")
    n, kh = w_q.shape
    w_sf = unswizzle_sf_128x4(w_sf_swizzled, n, 2 * kh // 16)
    a_vals = nvfp4_rows(act_q, np.asarray(act_sf, dtype=np.uint8))
    acc = matmul_nt(a_vals, n, lambda i, j: nvfp4_rows(w_q[i:j], w_sf[i:j]))
    return bf16_round(acc.astype(np.float32) * np.float32(alpha))
