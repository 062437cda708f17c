"""Host twins of the weight helpers (SPEC.md §7) and of ``fp4_quantize``. NumPy only.

The shapes of the production weights are not enforced here (the CPU tests use narrow ones);
the device helpers check them.
"""

from __future__ import annotations

import numpy as np

from h3cupy.formats import (
    fc1_prepack_rows,
    fp8_quantize_per_channel,
    nvfp4_global_scale_from_amax,
    nvfp4_quantize,
    swizzle_sf_128x4,
)
from h3cupy.reference._common import as_f32, scalar_f32

__all__ = [
    "fp4_quantize",
    "quantize_minimax_h3_qkv_weight_fp8",
    "quantize_minimax_h3_o_weight_fp8",
    "prepare_minimax_h3_fc1_weight_fp8",
    "prepare_minimax_h3_fc2_weight_fp8",
    "quantize_minimax_h3_qkv_weight_nvfp4",
    "quantize_minimax_h3_o_weight_nvfp4",
]


def fp4_quantize(
    a: np.ndarray,
    g: np.ndarray | float,
    sf_vec_size: int = 16,
    is_sf_swizzled_layout: bool = True,
) -> tuple[np.ndarray, np.ndarray]:
    """NVFP4 quantization of a ``[M, K]`` bf16 matrix (SPEC.md §1 block recipe).

    Args:
        a: ``[M, K]`` bf16 values, K a multiple of 16.
        g: fp32 global scale.
        sf_vec_size: must be 16.
        is_sf_swizzled_layout: True -> scales as a flat 128x4-swizzled uint8 array of
            ``swizzled_sf_nbytes(M, K/16)`` bytes; False -> linear uint8 ``[M, K/16]``.

    Returns:
        ``(packed uint8 [M, K/2], sf)``.
    """
    if sf_vec_size != 16:
        raise ValueError(f"sf_vec_size: only 16 is supported, got {sf_vec_size}")
    a = np.asarray(a)
    if a.ndim != 2:
        raise ValueError(f"a: expected [M, K], got shape {a.shape}")
    packed, sf = nvfp4_quantize(a, scalar_f32(g, "g"))
    return (packed, swizzle_sf_128x4(sf)) if is_sf_swizzled_layout else (packed, sf)


def _check_2d(w: np.ndarray, name: str) -> np.ndarray:
    w = np.asarray(w)
    if w.ndim != 2:
        raise ValueError(f"{name}: expected a 2-D [N, K] weight, got shape {w.shape}")
    return w


def quantize_minimax_h3_qkv_weight_fp8(w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-output-channel FP8 of the QKV weight (engine row order kept).

    Args:
        w: bf16 ``[3*H*Dh, K]`` (production ``[21504, 5376]``).

    Returns:
        ``(codes uint8 [N, K], scale float32 [N])``.
    """
    return fp8_quantize_per_channel(_check_2d(w, "qkv_weight"))


def quantize_minimax_h3_o_weight_fp8(w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-output-channel FP8 of the O weight: bf16 ``[N, K]`` (production ``[5376, 7168]``) ->
    ``(codes uint8 [N, K], scale float32 [N])``."""
    return fp8_quantize_per_channel(_check_2d(w, "o_weight"))


def prepare_minimax_h3_fc2_weight_fp8(w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-output-channel FP8 of the FC2 weight: bf16 ``[N, K]`` (production ``[5376, 14336]``) ->
    ``(codes uint8 [N, K], scale float32 [N])``, natural row order."""
    return fp8_quantize_per_channel(_check_2d(w, "fc2_weight"))


def prepare_minimax_h3_fc1_weight_fp8(w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-output-channel FP8 of the FC1 weight, then the prepacked row order of SPEC.md §6.

    Args:
        w: bf16 ``[2*ffn, K]`` in natural ``[gate; up]`` row order (production ``[28672, 5376]``).

    Returns:
        ``(codes uint8 [2*ffn, K], scale float32 [2*ffn])`` in prepacked row order (row-local
        quantization, so this equals quantizing the prepacked rows).
    """
    codes, scale = fp8_quantize_per_channel(_check_2d(w, "fc1_weight"))
    return fc1_prepack_rows(codes), fc1_prepack_rows(scale)


def _quantize_weight_nvfp4(w: np.ndarray, name: str) -> tuple[np.ndarray, np.ndarray, np.float32]:
    w = as_f32(_check_2d(w, name))
    g = nvfp4_global_scale_from_amax(np.max(np.abs(w)))
    packed, sf = fp4_quantize(w, g, is_sf_swizzled_layout=True)
    return packed, sf, g


def quantize_minimax_h3_qkv_weight_nvfp4(
    w: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.float32]:
    """NVFP4 of the QKV weight with ``g = 448*6 / max(amax, 1e-12)``.

    Args:
        w: bf16 ``[N, K]`` (production ``[21504, 5376]``, engine row order).

    Returns:
        ``(packed uint8 [N, K/2], sf uint8 flat 128x4-swizzled [swizzled_sf_nbytes(N, K/16)],
        g np.float32)``.
    """
    return _quantize_weight_nvfp4(w, "qkv_weight")


def quantize_minimax_h3_o_weight_nvfp4(w: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.float32]:
    """NVFP4 of the O weight (production ``[5376, 7168]``); same outputs as
    :func:`quantize_minimax_h3_qkv_weight_nvfp4`."""
    return _quantize_weight_nvfp4(w, "o_weight")
