"""Random inputs in the model's distributions (SPEC.md §8: never all-zero, fresh per test).

All bf16 tensors are returned as ``ml_dtypes.bfloat16`` arrays (view them as uint16 to upload);
indices as int32/int64; each helper takes an optional ``np.random.Generator`` (fresh, unseeded
when None). Distributions: x ~ N(0, 0.5), x_norm_weight ~ U(0.9, 1.1), AdaLN tables ~
U(-0.05, 0.05), gates ~ U(-1, 1), projection weights ~ N(0, 0.01), FC weights ~ N(0, 0.02),
q/k norm weights ~ U(0.9, 1.1), residual ~ N(0, 1), attention output ~ N(0, 0.5).
"""

from __future__ import annotations

import numpy as np

from h3cupy.formats import to_bf16

__all__ = [
    "normal_bf16",
    "uniform_bf16",
    "production_index",
    "rope_positions_3d",
    "rope_cache",
    "prologue_inputs",
    "pre_attention_inputs",
    "out_proj_inputs",
    "mlp_inputs",
]

D_MODEL = 5376
HEADS = 56
HEAD_DIM = 128
FFN = 14336
ROPE_FREQS = 16  # per axis (frame, height, width)


def _rng(rng: np.random.Generator | None) -> np.random.Generator:
    return np.random.default_rng() if rng is None else rng


def normal_bf16(
    shape: tuple[int, ...], std: float, rng: np.random.Generator | None = None
) -> np.ndarray:
    """bf16 array of ``shape`` drawn from N(0, std) (std is the standard deviation)."""
    r = _rng(rng)
    return to_bf16(r.standard_normal(shape, dtype=np.float32) * np.float32(std))


def uniform_bf16(
    shape: tuple[int, ...], lo: float, hi: float, rng: np.random.Generator | None = None
) -> np.ndarray:
    """bf16 array of ``shape`` drawn from U(lo, hi)."""
    r = _rng(rng)
    return to_bf16(r.uniform(lo, hi, size=shape).astype(np.float32))


def production_index(m: int, rows: int = 9, dtype: type = np.int64) -> np.ndarray:
    """Table index per token: production segments ``min(floor(m * rows / M), rows - 1)``; for
    ``M >= 129`` a few invalid entries: -1 where ``m % 101 == 50`` and ``rows`` where
    ``m % 103 == 60``.

    Returns:
        ``dtype`` (int32/int64) ``[M]``.
    """
    t = np.arange(m, dtype=np.int64)
    idx = np.minimum(t * rows // max(m, 1), rows - 1)
    if m >= 129:
        idx = np.where(t % 101 == 50, -1, idx)
        idx = np.where(t % 103 == 60, rows, idx)
    return idx.astype(dtype)


def rope_positions_3d(s: int) -> np.ndarray:
    """Synthetic (frame, height, width) positions of rows ``0..S-1``: ``(row // 4096,
    (row // 64) % 64, row % 64)`` as int64 ``[S, 3]``."""
    row = np.arange(s, dtype=np.int64)
    return np.stack([row // 4096, (row // 64) % 64, row % 64], axis=1)


def rope_cache(s: int) -> np.ndarray:
    """RoPE cos/sin cache ``[S, 96]`` bf16 from the synthetic 3-D positions.

    Phase of axis a, frequency i: ``pos_a * 10000^(-i/16)``, 48 phases ordered
    ``[frame 16 | height 16 | width 16]``; columns [0, 48) hold cos, [48, 96) sin (computed in
    float64, rounded to fp32 then bf16).
    """
    freqs = 10000.0 ** (-np.arange(ROPE_FREQS, dtype=np.float64) / ROPE_FREQS)
    pos = rope_positions_3d(s).astype(np.float64)
    phase = (pos[:, :, None] * freqs[None, None, :]).reshape(s, 3 * ROPE_FREQS)
    return to_bf16(np.concatenate([np.cos(phase), np.sin(phase)], axis=1))


def prologue_inputs(
    m: int,
    rows: int = 9,
    k: int = D_MODEL,
    index_dtype: type = np.int64,
    rng: np.random.Generator | None = None,
) -> dict[str, np.ndarray]:
    """Inputs of the shared prologue (SPEC.md §2) with engine-style strided AdaLN tables.

    Returns:
        dict with ``x`` bf16 ``[M, K]``; ``x_norm_weight`` bf16 ``[K]``; ``modulation`` bf16
        ``[rows, 6*K]`` (chunks shift_msa, scale_msa, gate_msa, shift_mlp, scale_mlp, gate_mlp;
        shift/scale chunks ~ U(-0.05, 0.05), gate chunks ~ U(-1, 1)); ``adaln_shift``,
        ``adaln_scale``, ``gate`` = column-chunk views 0, 1, 2 of ``modulation`` (row stride 6*K);
        ``adaln_index`` ``index_dtype`` ``[M]`` from :func:`production_index`.
    """
    r = _rng(rng)
    modulation = uniform_bf16((rows, 6 * k), -0.05, 0.05, r)
    for chunk in (2, 5):
        modulation[:, chunk * k : (chunk + 1) * k] = uniform_bf16((rows, k), -1.0, 1.0, r)
    return {
        "x": normal_bf16((m, k), 0.5, r),
        "x_norm_weight": uniform_bf16((k,), 0.9, 1.1, r),
        "modulation": modulation,
        "adaln_shift": modulation[:, 0:k],
        "adaln_scale": modulation[:, k : 2 * k],
        "gate": modulation[:, 2 * k : 3 * k],
        "adaln_index": production_index(m, rows, index_dtype),
    }


#: The BF16 pre-attention op's tensor arguments in call order (keys of pre_attention_inputs).
PRE_ATTENTION_KEYS = (
    "x",
    "x_norm_weight",
    "adaln_scale",
    "adaln_shift",
    "adaln_index",
    "qkv_weight",
    "q_norm_weight",
    "k_norm_weight",
    "rope_cos_sin",
)
#: The quantized pre-attention ops' non-weight tensor arguments: the prologue's five, then the
#: per-head three (the weight operands go between them).
QUANT_PRE_ATTENTION_KEYS = PRE_ATTENTION_KEYS[:5] + PRE_ATTENTION_KEYS[6:]


def pre_attention_inputs(
    m: int,
    rows: int = 9,
    k: int = D_MODEL,
    heads: int = HEADS,
    index_dtype: type = np.int64,
    rng: np.random.Generator | None = None,
) -> dict[str, np.ndarray]:
    """:func:`prologue_inputs` plus ``qkv_weight`` bf16 ``[3*heads*128, K]`` ~ N(0, 0.01) (engine
    row order), ``q_norm_weight`` / ``k_norm_weight`` bf16 ``[128]`` ~ U(0.9, 1.1) and
    ``rope_cos_sin`` = :func:`rope_cache` (M)."""
    r = _rng(rng)
    d = prologue_inputs(m, rows, k, index_dtype, r)
    d["qkv_weight"] = normal_bf16((3 * heads * HEAD_DIM, k), 0.01, r)
    d["q_norm_weight"] = uniform_bf16((HEAD_DIM,), 0.9, 1.1, r)
    d["k_norm_weight"] = uniform_bf16((HEAD_DIM,), 0.9, 1.1, r)
    d["rope_cos_sin"] = rope_cache(m)
    return d


def out_proj_inputs(
    m: int,
    rows: int = 9,
    n: int = D_MODEL,
    k: int = HEADS * HEAD_DIM,
    index_dtype: type = np.int32,
    rng: np.random.Generator | None = None,
) -> dict[str, np.ndarray]:
    """Inputs of the out_proj ops: ``attn_out`` bf16 ``[M, K]`` ~ N(0, 0.5), ``o_weight`` bf16
    ``[N, K]`` ~ N(0, 0.01), ``gate`` bf16 ``[rows, N]`` ~ U(-1, 1) (a column-chunk view of a
    ``[rows, 6*N]`` array), ``gate_index`` ``[M]`` (:func:`production_index`), ``residual`` bf16
    ``[M, N]`` ~ N(0, 1)."""
    r = _rng(rng)
    table = uniform_bf16((rows, 6 * n), -1.0, 1.0, r)
    return {
        "attn_out": normal_bf16((m, k), 0.5, r),
        "o_weight": normal_bf16((n, k), 0.01, r),
        "gate": table[:, 2 * n : 3 * n],
        "gate_index": production_index(m, rows, index_dtype),
        "residual": normal_bf16((m, n), 1.0, r),
    }


def mlp_inputs(
    m: int,
    rows: int = 9,
    d: int = D_MODEL,
    ffn: int = FFN,
    index_dtype: type = np.int64,
    rng: np.random.Generator | None = None,
) -> dict[str, np.ndarray]:
    """:func:`prologue_inputs` (width ``d``; ``gate`` = the gate chunk of the same projection) plus
    ``residual`` bf16 ``[M, d]`` ~ N(0, 1), ``fc1_weight`` bf16 ``[2*ffn, d]`` (natural
    ``[gate; up]`` order) and ``fc2_weight`` bf16 ``[d, ffn]``, both ~ N(0, 0.02)."""
    r = _rng(rng)
    out = prologue_inputs(m, rows, d, index_dtype, r)
    out["residual"] = normal_bf16((m, d), 1.0, r)
    out["fc1_weight"] = normal_bf16((2 * ffn, d), 0.02, r)
    out["fc2_weight"] = normal_bf16((d, ffn), 0.02, r)
    return out
