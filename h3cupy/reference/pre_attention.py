"""Host references of the pre-attention ops (SPEC.md §3, §4): prologue, QKV GEMM in float64,
per-head Q/K RMSNorm, 3-D RoPE, Ulysses pack (BF16) or per-kind quantized outputs (FP8 / NVFP4)."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from h3cupy.formats import bf16_round, e4m3_encode, fp8_quantize_per_token, nvfp4_quantize
from h3cupy.reference._common import (
    as_f32,
    fp8_linear,
    matmul_nt,
    nvfp4_alpha,
    nvfp4_linear,
    rms_normalize,
    round_sum_f32,
    scalar_f32,
)
from h3cupy.reference.prologue import prologue

__all__ = [
    "PreAttentionOutput",
    "minimax_h3_bf16_pre_attention",
    "minimax_h3_fp8_pre_attention",
    "minimax_h3_nvfp4_pre_attention",
    "qkv_epilogue",
]

HEAD_DIM = 128
ROPE_HALF = 48  # RoPE pairs (d, d + 48) for d in [0, 48); dims [96, 128) pass through
OUT_MODES = ("bf16", "e4m3", "nvfp4")


class PreAttentionOutput(NamedTuple):
    """Outputs of the FP8 / NVFP4 pre-attention ops, each ``[M, H, ...]``.

    ``q, k, v``: bf16 mode float32 ``[M, H, 128]`` (bf16 values); e4m3 mode uint8 codes
    ``[M, H, 128]``; nvfp4 mode uint8 packed ``[M, H, 64]``. ``q_sf, k_sf, v_sf``: uint8
    ``[M, H, 8]`` linear ue4m3 scales in nvfp4 mode, else None.
    """

    q: np.ndarray
    k: np.ndarray
    v: np.ndarray
    q_sf: np.ndarray | None
    k_sf: np.ndarray | None
    v_sf: np.ndarray | None


def _heads_of(n_rows: int) -> int:
    if n_rows % (3 * HEAD_DIM):
        raise ValueError(f"qkv weight: expected 3*H*128 rows, got {n_rows}")
    return n_rows // (3 * HEAD_DIM)


def _rope(n: np.ndarray, cs: np.ndarray) -> np.ndarray:
    """RoPE of SPEC.md §3 step 4 on normalized heads.

    Args:
        n: float32 ``[M, H, 128]`` bf16 values.
        cs: float32 ``[M, 96]`` cache rows (cos in [0, 48), sin in [48, 96)).

    Returns:
        float32 ``[M, H, 128]``: ``bf16(n_d*c - n_{d+48}*s)``, ``bf16(n_{d+48}*c + n_d*s)`` (exact
        products, one fp32 rounding, one bf16 rounding), dims [96, 128) unchanged.
    """
    c = cs[:, None, :ROPE_HALF].astype(np.float64)
    s = cs[:, None, ROPE_HALF : 2 * ROPE_HALF].astype(np.float64)
    lo = n[..., :ROPE_HALF].astype(np.float64)
    hi = n[..., ROPE_HALF : 2 * ROPE_HALF].astype(np.float64)
    out = n.copy()
    out[..., :ROPE_HALF] = bf16_round(round_sum_f32(lo * c, -(hi * s)))
    out[..., ROPE_HALF : 2 * ROPE_HALF] = bf16_round(round_sum_f32(hi * c, lo * s))
    return out


def qkv_epilogue(
    y: np.ndarray,
    q_norm_weight: np.ndarray,
    k_norm_weight: np.ndarray,
    cs_rows: np.ndarray,
    qk_eps: float,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Q/K per-head RMSNorm + RoPE and V passthrough on bf16 GEMM outputs (SPEC.md §3 steps 3-5).

    Args:
        y: float32 ``[M, 3*H*128]`` bf16 values in engine column order ``[kind, head, dim]``.
        q_norm_weight, k_norm_weight: ``[128]`` bf16 values.
        cs_rows: ``[M, 96]`` RoPE cache row of each token.
        qk_eps: epsilon of the Q/K RMSNorms.

    Returns:
        ``(q, k, v)`` float32 ``[M, H, 128]`` bf16 values.
    """
    m, n_cols = y.shape
    heads = _heads_of(n_cols)
    r = y.reshape(m, 3, heads, HEAD_DIM)
    cs = as_f32(cs_rows)
    q = _rope(rms_normalize(r[:, 0], q_norm_weight, qk_eps), cs)
    k = _rope(rms_normalize(r[:, 1], k_norm_weight, qk_eps), cs)
    return q, k, r[:, 2].copy()


def minimax_h3_bf16_pre_attention(
    x: np.ndarray,
    x_norm_weight: np.ndarray,
    adaln_scale: np.ndarray,
    adaln_shift: np.ndarray,
    adaln_index: np.ndarray,
    qkv_weight: np.ndarray,
    q_norm_weight: np.ndarray,
    k_norm_weight: np.ndarray,
    rope_cos_sin: np.ndarray,
    *,
    ulysses_degree: int,
    eps: float = 1e-5,
    qk_eps: float | None = None,
    rope_positions: np.ndarray | None = None,
    a: np.ndarray | None = None,
) -> np.ndarray:
    """Host reference of ``minimax_h3_bf16_pre_attention`` (SPEC.md §3).

    Args:
        x, x_norm_weight, adaln_scale, adaln_shift, adaln_index: prologue inputs (see
            :func:`h3cupy.reference.prologue`), x ``[M, K]``.
        qkv_weight: bf16 ``[3*H*128, K]`` in engine row order ``[kind, head, dim]`` (H = 56 in
            production).
        q_norm_weight, k_norm_weight: bf16 ``[128]``.
        rope_cos_sin: bf16 ``[S, 96]``.
        ulysses_degree: P, dividing H.
        eps: prologue epsilon; qk_eps: Q/K epsilon (None -> eps).
        rope_positions: int32/int64 ``[M]`` cache rows (clamped to ``[0, S)``); None -> ``p = m``
            (requires ``S >= M``).
        a: optional float32/bf16 ``[M, K]`` activation to use instead of computing the prologue
            (e.g. the kernel's own workspace).

    Returns:
        float32 ``[P, M, H // P, 3, 128]`` bf16 values: element (m, h, kind, d) at
        ``[h // hp, m, h % hp, kind, d]``. ``y = bf16(fp32(a @ W^T))`` with a float64 GEMM.
    """
    if a is None:
        a = prologue(x, x_norm_weight, adaln_scale, adaln_shift, adaln_index, eps)
    a = as_f32(a)
    m = a.shape[0]
    w = np.asarray(qkv_weight)
    heads = _heads_of(w.shape[0])
    p = int(ulysses_degree)
    if p < 1 or heads % p:
        raise ValueError(f"ulysses_degree: must divide {heads} heads, got {ulysses_degree}")
    cs = as_f32(rope_cos_sin)
    if cs.ndim != 2 or cs.shape[0] < 1 or cs.shape[1] != 2 * ROPE_HALF:
        raise ValueError(f"rope_cos_sin: expected [S, 96] with S >= 1, got {cs.shape}")
    s_rows = cs.shape[0]
    if rope_positions is None:
        if s_rows < m:
            raise ValueError(f"rope_cos_sin: identity positions need S >= M={m}, got S={s_rows}")
        pos = np.arange(m)
    else:
        pos = np.asarray(rope_positions)
        if pos.shape != (m,) or pos.dtype not in (np.int32, np.int64):
            raise ValueError(
                f"rope_positions: expected int32/int64 [{m}], got {pos.dtype} {pos.shape}"
            )
        pos = np.clip(pos.astype(np.int64), 0, s_rows - 1)
    y = bf16_round(matmul_nt(a, w.shape[0], lambda i, j: as_f32(w[i:j])))
    q, k, v = qkv_epilogue(
        y, q_norm_weight, k_norm_weight, cs[pos], eps if qk_eps is None else qk_eps
    )
    hp = heads // p
    packed = np.stack([q, k, v], axis=2)  # [M, H, 3, 128]
    return np.ascontiguousarray(packed.reshape(m, p, hp, 3, HEAD_DIM).transpose(1, 0, 2, 3, 4))


def _quantized_outputs(
    q: np.ndarray,
    k: np.ndarray,
    v: np.ndarray,
    out_mode: str,
    descales: tuple[object, object, object],
    global_scales: tuple[object, object, object],
) -> PreAttentionOutput:
    """Apply an ``out_mode`` of SPEC.md §4 to the final bf16 q, k, v ``[M, H, 128]``."""
    if out_mode == "bf16":
        return PreAttentionOutput(q, k, v, None, None, None)
    names = ("q", "k", "v")
    if out_mode == "e4m3":
        codes = []
        for t, ds, nm in zip((q, k, v), descales, names, strict=True):
            if ds is None:
                raise ValueError(f"{nm}_descale: required when out_mode='e4m3'")
            # NOTE: os = RN_fp32(1 / fp32(descale)); a multiply by it, not a division.
            os = np.float32(1.0) / scalar_f32(ds, f"{nm}_descale")
            codes.append(e4m3_encode(t * os))
        return PreAttentionOutput(*codes, None, None, None)
    if out_mode == "nvfp4":
        packs, sfs = [], []
        for t, gs, nm in zip((q, k, v), global_scales, names, strict=True):
            if gs is None:
                raise ValueError(f"{nm}_global_scale: required when out_mode='nvfp4'")
            pk, sf = nvfp4_quantize(t, scalar_f32(gs, f"{nm}_global_scale"))
            packs.append(pk)
            sfs.append(sf)
        return PreAttentionOutput(*packs, *sfs)
    raise ValueError(f"out_mode: expected one of {OUT_MODES}, got {out_mode!r}")


def _identity_rope_rows(rope_cos_sin: np.ndarray, m: int) -> np.ndarray:
    cs = as_f32(rope_cos_sin)
    if cs.ndim != 2 or cs.shape[0] < m or cs.shape[1] != 2 * ROPE_HALF:
        raise ValueError(f"rope_cos_sin: expected [M={m}, 96], got {cs.shape}")
    return cs[:m]


def minimax_h3_fp8_pre_attention(
    x: np.ndarray,
    x_norm_weight: np.ndarray,
    adaln_scale: np.ndarray,
    adaln_shift: np.ndarray,
    adaln_index: np.ndarray,
    qkv_weight_q: np.ndarray,
    qkv_weight_scale: np.ndarray,
    q_norm_weight: np.ndarray,
    k_norm_weight: np.ndarray,
    rope_cos_sin: np.ndarray,
    *,
    eps: float = 1e-5,
    out_mode: str = "bf16",
    q_descale: object = None,
    k_descale: object = None,
    v_descale: object = None,
    q_global_scale: object = None,
    k_global_scale: object = None,
    v_global_scale: object = None,
    act_q: np.ndarray | None = None,
    act_scale: np.ndarray | None = None,
) -> PreAttentionOutput:
    """Host reference of ``minimax_h3_fp8_pre_attention`` (SPEC.md §4, W8A8).

    Args:
        x, x_norm_weight, adaln_scale, adaln_shift, adaln_index: prologue inputs (x ``[M, K]``).
        qkv_weight_q: uint8 e4m3 ``[3*H*128, K]`` (engine row order); qkv_weight_scale: float32
            ``[3*H*128]``.
        q_norm_weight, k_norm_weight: bf16 ``[128]``; rope_cos_sin: bf16 ``[>= M, 96]`` (p = m).
        eps: prologue and Q/K epsilon.
        out_mode: "bf16", "e4m3" (needs ``*_descale``) or "nvfp4" (needs ``*_global_scale``).
        act_q, act_scale: optional uint8 ``[M, K]`` / float32 ``[M]`` activation to consume instead
            of quantizing the prologue (the kernel's own workspace).

    Returns:
        :class:`PreAttentionOutput`; ``y = bf16(fp32(fp32(acc) * act_scale[m]) * w_scale[n])``.
    """
    if act_q is None:
        a = prologue(x, x_norm_weight, adaln_scale, adaln_shift, adaln_index, eps)
        act_q, act_scale = fp8_quantize_per_token(a)
    elif act_scale is None:
        raise ValueError("act_scale: required together with act_q")
    y = fp8_linear(act_q, act_scale, qkv_weight_q, qkv_weight_scale)
    m = y.shape[0]
    q, k, v = qkv_epilogue(
        y, q_norm_weight, k_norm_weight, _identity_rope_rows(rope_cos_sin, m), eps
    )
    return _quantized_outputs(
        q,
        k,
        v,
        out_mode,
        (q_descale, k_descale, v_descale),
        (q_global_scale, k_global_scale, v_global_scale),
    )


def minimax_h3_nvfp4_pre_attention(
    x: np.ndarray,
    x_norm_weight: np.ndarray,
    adaln_scale: np.ndarray,
    adaln_shift: np.ndarray,
    adaln_index: np.ndarray,
    qkv_weight_q: np.ndarray,
    qkv_weight_sf: np.ndarray,
    qkv_weight_global_scale: object,
    act_global_scale: object,
    q_norm_weight: np.ndarray,
    k_norm_weight: np.ndarray,
    rope_cos_sin: np.ndarray,
    *,
    eps: float = 1e-5,
    out_mode: str = "bf16",
    alpha: object = None,
    q_descale: object = None,
    k_descale: object = None,
    v_descale: object = None,
    q_global_scale: object = None,
    k_global_scale: object = None,
    v_global_scale: object = None,
    act_q: np.ndarray | None = None,
    act_sf: np.ndarray | None = None,
) -> PreAttentionOutput:
    """Host reference of ``minimax_h3_nvfp4_pre_attention`` (SPEC.md §4, W4A4).

    Args:
        x, x_norm_weight, adaln_scale, adaln_shift, adaln_index: prologue inputs (x ``[M, K]``).
        qkv_weight_q: uint8 ``[3*H*128, K/2]``; qkv_weight_sf: flat 128x4-swizzled ue4m3 scales
            of ``[3*H*128, K/16]``; qkv_weight_global_scale: fp32 scalar.
        act_global_scale: fp32 scalar g of the activation quantization.
        q_norm_weight, k_norm_weight: bf16 ``[128]``; rope_cos_sin: bf16 ``[>= M, 96]`` (p = m).
        eps, out_mode, scalars: as :func:`minimax_h3_fp8_pre_attention`; alpha: optional override of
            ``1 / (act_global_scale * qkv_weight_global_scale)``.
        act_q, act_sf: optional uint8 ``[M, K/2]`` / uint8 ``[M, K/16]`` linear activation to
            consume instead of quantizing the prologue.

    Returns:
        :class:`PreAttentionOutput`; ``y = bf16(fp32(acc) * alpha)``.
    """
    if act_q is None:
        a = prologue(x, x_norm_weight, adaln_scale, adaln_shift, adaln_index, eps)
        act_q, act_sf = nvfp4_quantize(a, scalar_f32(act_global_scale, "act_global_scale"))
    elif act_sf is None:
        raise ValueError("act_sf: required together with act_q")
    al = nvfp4_alpha(act_global_scale, qkv_weight_global_scale, alpha)
    y = nvfp4_linear(act_q, act_sf, qkv_weight_q, qkv_weight_sf, al)
    m = y.shape[0]
    q, k, v = qkv_epilogue(
        y, q_norm_weight, k_norm_weight, _identity_rope_rows(rope_cos_sin, m), eps
    )
    return _quantized_outputs(
        q,
        k,
        v,
        out_mode,
        (q_descale, k_descale, v_descale),
        (q_global_scale, k_global_scale, v_global_scale),
    )
