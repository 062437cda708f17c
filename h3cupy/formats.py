"""Host codecs and layouts for the number formats of SPEC.md §1 (NumPy + ml_dtypes only).

Everything here is vectorised NumPy and imports without CuPy, so the references and the CPU tests
can use it on any machine. Values that the kernels hold in fp32 registers are computed in
``np.float32`` in the order SPEC.md §1 gives; every encoder first rounds its input to float32 (the
kernels convert from fp32 registers), so a float64 argument is *not* rounded once from float64.

Formats (SPEC.md §1):

* bf16: round to nearest even from fp32; bf16 -> fp32 exact.
* e4m3 (``float8_e4m3fn``): RNE with saturation to ±448 (PTX ``cvt.rn.satfinite.e4m3x2.f32``).
* ue4m3: e4m3 of a non-negative value, sign bit clear.
* e2m1: magnitudes {0, .5, 1, 1.5, 2, 3, 4, 6} as codes 0..7, sign in bit 3, RNE to the even code,
  saturating at ±6; two codes per byte, element 2j in the low nibble.
* NVFP4: e2m1 codes + one ue4m3 scale per 16 elements along K + an fp32 global scale ``g``.
* 128x4 swizzled scale layout of FlashInfer / cuBLAS.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

__all__ = [
    "BF16",
    "E4M3",
    "E4M3_MAX",
    "E2M1_MAX",
    "bf16_round",
    "to_bf16",
    "bf16_ulp",
    "e4m3_encode",
    "e4m3_decode",
    "ue4m3_encode",
    "ue4m3_decode",
    "e2m1_encode",
    "e2m1_decode",
    "pack_e2m1",
    "unpack_e2m1",
    "nvfp4_quantize",
    "nvfp4_dequantize",
    "nvfp4_global_scale_from_amax",
    "fp8_quantize_per_token",
    "fp8_quantize_per_channel",
    "fp8_dequantize",
    "sf_128x4_offset",
    "swizzled_sf_nbytes",
    "swizzle_sf_128x4",
    "unswizzle_sf_128x4",
    "fc1_prepack_source_rows",
    "fc1_prepack_rows",
    "fc1_unpack_rows",
    "qkv_rows_checkpoint_to_engine",
    "qkv_rows_engine_to_checkpoint",
]

BF16 = ml_dtypes.bfloat16
E4M3 = ml_dtypes.float8_e4m3fn

E4M3_MAX = np.float32(448.0)
E2M1_MAX = np.float32(6.0)
NVFP4_BLOCK = 16

_F32 = np.float32
# NOTE: fp32(1/6) as a kernel constant; 1/6 has no fp32 tie, so rounding via float64 is exact RN.
_ONE_SIXTH = np.float32(1.0 / 6.0)
_AMAX_FLOOR = np.float32(1e-12)

# e2m1 magnitudes by code 0..7; codes 8..15 are the negatives (8 is -0).
_E2M1_VALUES = np.array(
    [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0],
    dtype=np.float32,
)
# Decision points of RNE-to-even-code: (threshold, inclusive). A tie goes to the even code, so the
# comparison is strict where the lower neighbour's code is even and inclusive where it is odd.
_E2M1_STEPS = (
    (0.25, False),  # 0 | 0.5   tie -> code 0
    (0.75, True),  # 0.5 | 1   tie -> code 2
    (1.25, False),  # 1 | 1.5   tie -> code 2
    (1.75, True),  # 1.5 | 2   tie -> code 4
    (2.5, False),  # 2 | 3     tie -> code 4
    (3.5, True),  # 3 | 4     tie -> code 6
    (5.0, False),  # 4 | 6     tie -> code 6
)


def _as_f32(x: np.ndarray | float) -> np.ndarray:
    """Return ``x`` as a float32 ndarray (bf16 / float16 exact, float64 rounded RN once)."""
    return np.asarray(x).astype(np.float32, copy=False)


def _scalar_f32(x: np.ndarray | float, name: str) -> np.float32:
    """A Python float, NumPy scalar or one-element array as ``np.float32``."""
    arr = np.asarray(x)
    if arr.size != 1:
        raise ValueError(f"{name}: expected a scalar or a one-element array, got shape {arr.shape}")
    return np.float32(arr.reshape(-1)[0])


# ----------------------------------------------------------------------------------------- bf16


def bf16_round(x: np.ndarray | float) -> np.ndarray:
    """Round to bf16 (RNE from fp32) and return the values as float32.

    Args:
        x: any real array; it is first converted to float32 (as a kernel holds it in a register).

    Returns:
        float32 array of ``x``'s shape whose values are exactly representable in bf16 (NaN stays
        NaN).
    """
    return _as_f32(x).astype(BF16).astype(np.float32)


def to_bf16(x: np.ndarray | float) -> np.ndarray:
    """Round to bf16 (RNE from fp32) and return an ``ml_dtypes.bfloat16`` array of ``x``'s shape."""
    return _as_f32(x).astype(BF16)


def bf16_ulp(mag: np.ndarray | float) -> np.ndarray:
    """Spacing of bf16 numbers at ``|mag|`` (the tolerance unit of SPEC.md §8).

    For ``2^e <= |mag| < 2^(e+1)`` this is ``2^(e-7)``. Below the smallest normal (including 0)
    it is the subnormal spacing ``2^-133``, i.e. the spacing at the smallest normal. Inf/NaN give
    inf.

    Args:
        mag: any real array (converted to float32).

    Returns:
        float32 array of ``mag``'s shape.
    """
    bits = np.abs(_as_f32(mag)).view(np.uint32)
    biased = (bits >> np.uint32(23)).astype(np.int32)
    exp = np.maximum(biased, 1) - 127 - 7
    ulp = np.ldexp(np.float32(1.0), exp).astype(np.float32)
    return np.where(biased == 255, np.float32(np.inf), ulp).astype(np.float32)


# ----------------------------------------------------------------------------------------- e4m3


def e4m3_encode(x: np.ndarray | float) -> np.ndarray:
    """Encode to float8_e4m3fn bytes like PTX ``cvt.rn.satfinite.e4m3x2.f32``.

    ``x`` is rounded to float32 first, then RNE to e4m3; finite values beyond ±448 and ±inf
    saturate to ±448 (0x7E / 0xFE); NaN gives 0x7F. ml_dtypes' float32 -> e4m3 conversion is a
    single RNE rounding (checked by tests/test_formats.py) but turns overflow into NaN, hence the
    clip.

    Returns:
        uint8 array of ``x``'s shape.
    """
    xf = _as_f32(x)
    codes = np.clip(xf, -E4M3_MAX, E4M3_MAX).astype(E4M3).view(np.uint8)
    nan = np.isnan(xf)
    if nan.any():
        codes = np.where(nan, np.uint8(0x7F), codes)
    return codes


def e4m3_decode(codes: np.ndarray) -> np.ndarray:
    """Decode float8_e4m3fn bytes (uint8 array) to float32 (0x7F / 0xFF decode to NaN).

    A float8_e4m3fn-typed array is taken as what it is; any other non-integer array is refused
    (a value cast to uint8 would silently decode the wrong codes)."""
    a = np.asarray(codes)
    if a.dtype == E4M3:
        return a.astype(np.float32)
    if a.dtype.kind not in "ui":
        raise TypeError(f"e4m3_decode: expected uint8 codes or float8_e4m3fn data, got {a.dtype}")
    return a.astype(np.uint8).view(E4M3).astype(np.float32)


def ue4m3_encode(x: np.ndarray | float) -> np.ndarray:
    """Encode a non-negative scale to a ue4m3 byte: e4m3 (RNE, saturating at 448) with the sign
    bit cleared. Values that round to zero (< 2^-10, or exactly 2^-10 by ties-to-even) give 0.

    Returns:
        uint8 array of ``x``'s shape, values 0..0x7E (0x7F for NaN input).
    """
    return e4m3_encode(x) & np.uint8(0x7F)


def ue4m3_decode(codes: np.ndarray) -> np.ndarray:
    """Decode ue4m3 scale bytes (uint8 array; bit 7 ignored) to float32."""
    return e4m3_decode(np.asarray(codes, dtype=np.uint8) & np.uint8(0x7F))


# ----------------------------------------------------------------------------------------- e2m1


def e2m1_encode(x: np.ndarray | float) -> np.ndarray:
    """Encode to e2m1 codes like PTX ``cvt.rn.satfinite.e2m1x2.f32``.

    ``x`` is rounded to float32 first. The magnitude code counts the decision points ``|x|``
    passes: ``> 0.25, >= 0.75, > 1.25, >= 1.75, > 2.5, >= 3.5, > 5`` (ties to the even code,
    |x| >= 6 saturates to code 7). The sign bit (bit 3) is the sign bit of ``x`` (so -0.0 -> 0x8;
    +0 and -0 codes are interchangeable, SPEC.md §1). NaN gives code 0 or 8 (all comparisons false).

    Returns:
        uint8 array of ``x``'s shape with codes 0..15.
    """
    xf = _as_f32(x)
    mag = np.abs(xf)
    code = np.zeros(xf.shape, dtype=np.uint8)
    for threshold, inclusive in _E2M1_STEPS:
        passed = mag >= np.float32(threshold) if inclusive else mag > np.float32(threshold)
        code += passed.view(np.uint8)
    code |= np.signbit(xf).view(np.uint8) << np.uint8(3)
    return code


def e2m1_decode(codes: np.ndarray) -> np.ndarray:
    """Decode e2m1 codes (uint8 0..15, upper nibble ignored) to float32."""
    return _E2M1_VALUES[np.asarray(codes, dtype=np.uint8) & np.uint8(0x0F)]


def pack_e2m1(codes: np.ndarray) -> np.ndarray:
    """Pack e2m1 codes two per byte: element 2j in the low nibble, 2j+1 in the high nibble.

    Args:
        codes: uint8 ``[..., K]`` with K even, values 0..15.

    Returns:
        uint8 ``[..., K // 2]``.
    """
    codes = np.asarray(codes, dtype=np.uint8)
    if codes.shape[-1] % 2:
        raise ValueError(f"pack_e2m1: last dim must be even, got shape {codes.shape}")
    lo = codes[..., 0::2] & np.uint8(0x0F)
    hi = codes[..., 1::2] & np.uint8(0x0F)
    return lo | (hi << np.uint8(4))


def unpack_e2m1(packed: np.ndarray) -> np.ndarray:
    """Inverse of :func:`pack_e2m1`: uint8 ``[..., K // 2]`` -> uint8 codes ``[..., K]``."""
    packed = np.asarray(packed, dtype=np.uint8)
    out = np.empty(packed.shape[:-1] + (2 * packed.shape[-1],), dtype=np.uint8)
    out[..., 0::2] = packed & np.uint8(0x0F)
    out[..., 1::2] = packed >> np.uint8(4)
    return out


# ---------------------------------------------------------------------------------------- NVFP4


def nvfp4_global_scale_from_amax(amax: np.ndarray | float) -> np.float32:
    """``g = fp32(448 * 6) / max(amax, 1e-12)`` in fp32 arithmetic (SPEC.md §7).

    Args:
        amax: scalar or one-element array (the tensor's max |value|).

    Returns:
        ``np.float32`` scalar.
    """
    a = _scalar_f32(amax, "amax")
    return np.float32(np.float32(448.0 * 6.0) / np.maximum(a, _AMAX_FLOOR))


def nvfp4_quantize(a: np.ndarray, g: np.ndarray | float) -> tuple[np.ndarray, np.ndarray]:
    """NVFP4 block quantization of SPEC.md §1 along the last axis, linear scale layout.

    Per block of 16 consecutive values ``v`` (fp32 throughout)::

        bamax = max |v|
        sf    = ue4m3((bamax * fp32(1/6)) * g)
        os    = g / float(sf)  if sf != 0 else 0      (IEEE fp32 division)
        code  = e2m1(fp32(v * os))

    A block holding a NaN (or any block when ``g`` is NaN) has a NaN amax, so its scale is the
    NaN code 0x7F and every value of the block dequantizes to NaN. That block's codes are not
    part of the contract (here 0 or 8; the device's may differ): only its scale is compared.

    Args:
        a: ``[..., K]`` bf16 values (``ml_dtypes.bfloat16`` or float32 holding bf16 values),
            K a multiple of 16.
        g: fp32 global scale (Python float, NumPy scalar or one-element array).

    Returns:
        ``(packed, sf)``: uint8 ``[..., K // 2]`` (nibble order of :func:`pack_e2m1`) and uint8
        ``[..., K // 16]`` ue4m3 scales (row-major, linear).
    """
    gf = _scalar_f32(g, "g")
    v = _as_f32(a)
    k = v.shape[-1]
    if k % NVFP4_BLOCK:
        raise ValueError(f"nvfp4_quantize: last dim must be a multiple of 16, got {v.shape}")
    blocks = v.reshape(v.shape[:-1] + (k // NVFP4_BLOCK, NVFP4_BLOCK))
    bamax = np.max(np.abs(blocks), axis=-1)
    sf = ue4m3_encode((bamax * _ONE_SIXTH) * gf)
    sfd = ue4m3_decode(sf)
    os = np.zeros(sfd.shape, dtype=np.float32)
    np.divide(gf, sfd, out=os, where=sf != 0)
    with np.errstate(invalid="ignore"):  # inf * 0 in a block holding inf
        codes = e2m1_encode(blocks * os[..., None])
    return pack_e2m1(codes.reshape(v.shape)), sf


def nvfp4_dequantize(packed: np.ndarray, sf: np.ndarray, g: np.ndarray | float) -> np.ndarray:
    """Decode an NVFP4 tensor: ``value = code * float(sf) / g`` (fp32 math, linear scales).

    Args:
        packed: uint8 ``[..., K // 2]``.
        sf: uint8 ``[..., K // 16]`` ue4m3 block scales (linear layout).
        g: fp32 global scale.

    Returns:
        float32 ``[..., K]``.
    """
    gf = _scalar_f32(g, "g")
    vals = e2m1_decode(unpack_e2m1(packed))
    k = vals.shape[-1]
    blocks = vals.reshape(vals.shape[:-1] + (k // NVFP4_BLOCK, NVFP4_BLOCK))
    out = (blocks * ue4m3_decode(sf)[..., None]) / gf
    return out.reshape(vals.shape).astype(np.float32, copy=False)


# ------------------------------------------------------------------------------------------ FP8


def _fp8_rowwise(w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Row-wise FP8: ``s = max(amax, 1e-12) / 448`` and ``codes = e4m3(fp32(w / s))`` (true fp32
    divisions; the encoder saturates at ±448, which is the clip of SPEC.md §1)."""
    v = _as_f32(w)
    if v.ndim != 2:
        raise ValueError(f"expected a 2-D [rows, K] array, got shape {v.shape}")
    amax = np.max(np.abs(v), axis=1) if v.shape[1] else np.zeros(v.shape[0], np.float32)
    scale = (np.maximum(amax, _AMAX_FLOOR) / E4M3_MAX).astype(np.float32)
    with np.errstate(invalid="ignore"):  # a row holding inf/NaN quantizes to NaN codes
        codes = e4m3_encode(v / scale[:, None])
    return codes, scale


def fp8_quantize_per_token(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-token FP8 of SPEC.md §1: ``s = max(amax|a|, 1e-12) / 448``,
    ``codes = e4m3(RN_fp32(a / s))``.

    Both are true IEEE fp32 divisions (a multiply by ``1/s`` is a different function).

    Args:
        a: ``[M, K]`` bf16 values (bfloat16 or float32 array).

    Returns:
        ``(codes, scale)``: uint8 ``[M, K]`` e4m3 bytes and float32 ``[M]``.
    """
    return _fp8_rowwise(a)


def fp8_quantize_per_channel(w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-output-channel FP8 weight of SPEC.md §1: per row ``s = max(amax, 1e-12) / 448`` (true
    division), ``codes = e4m3(clip(w / s, ±448))``.

    Args:
        w: ``[N, K]`` bf16 weight (bfloat16 or float32 array).

    Returns:
        ``(codes, scale)``: uint8 ``[N, K]`` and float32 ``[N]``; row order unchanged.
    """
    return _fp8_rowwise(w)


def fp8_dequantize(codes: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """``decode(codes) * scale[:, None]`` in fp32: uint8 ``[R, K]``, float32 ``[R]`` -> float32
    ``[R, K]``."""
    return e4m3_decode(codes) * np.asarray(scale, dtype=np.float32)[:, None]


# ------------------------------------------------------------------------------ 128x4 swizzle


def swizzled_sf_nbytes(rows: int, n_cols: int) -> int:
    """Bytes of a 128x4-swizzled ``[rows, n_cols]`` scale matrix:
    ``ceil(R/128)*128*ceil(C/4)*4``."""
    return -(-int(rows) // 128) * 128 * (-(-int(n_cols) // 4) * 4)


def sf_128x4_offset(r: np.ndarray | int, c: np.ndarray | int, n_cols: int) -> np.ndarray:
    """Byte offset of ``SF[r, c]`` in the 128x4 swizzled layout (SPEC.md §1)::

        ((r // 128) * (C' / 4) + c // 4) * 512 + (r % 32) * 16 + ((r % 128) // 32) * 4 + c % 4

    with ``C' = ceil(n_cols / 4) * 4``.

    Args:
        r, c: integer arrays (broadcast together) of row and scale-column indices.
        n_cols: the unpadded scale-column count C (= K / 16).

    Returns:
        int64 array of the broadcast shape.
    """
    r = np.asarray(r, dtype=np.int64)
    c = np.asarray(c, dtype=np.int64)
    col_tiles = -(-int(n_cols) // 4)
    return ((r // 128) * col_tiles + c // 4) * 512 + (r % 32) * 16 + ((r % 128) // 32) * 4 + c % 4


def swizzle_sf_128x4(sf: np.ndarray) -> np.ndarray:
    """Linear ``[R, C]`` scale bytes -> flat 128x4 swizzled bytes (padding bytes are 0).

    Args:
        sf: uint8 ``[R, C]``.

    Returns:
        uint8 ``[swizzled_sf_nbytes(R, C)]``.
    """
    sf = np.asarray(sf, dtype=np.uint8)
    if sf.ndim != 2:
        raise ValueError(f"swizzle_sf_128x4: expected [rows, cols], got shape {sf.shape}")
    rows, cols = sf.shape
    rp, cp = -(-rows // 128) * 128, -(-cols // 4) * 4
    padded = np.zeros((rp, cp), dtype=np.uint8)
    padded[:rows, :cols] = sf
    # row r = 128*rb + 32*r4 + r32, column c = 4*cb + c4  ->  [rb, cb, r32, r4, c4]
    tiles = padded.reshape(rp // 128, 4, 32, cp // 4, 4).transpose(0, 3, 2, 1, 4)
    return np.ascontiguousarray(tiles).reshape(-1)


def unswizzle_sf_128x4(flat: np.ndarray, rows: int, n_cols: int) -> np.ndarray:
    """Inverse of :func:`swizzle_sf_128x4`.

    Args:
        flat: uint8 array with exactly ``swizzled_sf_nbytes(rows, n_cols)`` bytes (any shape).
        rows, n_cols: the logical ``[R, C]`` shape.

    Returns:
        uint8 ``[R, C]``.
    """
    flat = np.asarray(flat, dtype=np.uint8).reshape(-1)
    need = swizzled_sf_nbytes(rows, n_cols)
    if flat.size != need:
        raise ValueError(
            f"unswizzle_sf_128x4: expected {need} bytes for [{rows}, {n_cols}] scales, "
            f"got {flat.size}"
        )
    rp, cp = -(-rows // 128) * 128, -(-n_cols // 4) * 4
    tiles = flat.reshape(rp // 128, cp // 4, 32, 4, 4).transpose(0, 3, 2, 1, 4)
    return np.ascontiguousarray(tiles.reshape(rp, cp)[:rows, :n_cols])


# ------------------------------------------------------------------------------- row orders


def fc1_prepack_source_rows(ffn: int = 14336) -> np.ndarray:
    """Source row (natural ``[gate; up]`` order) of each prepacked FC1 row (SPEC.md §6).

    Prepacked row ``p = 16 * (c // 8) + c % 8 + 8 * is_up`` holds output column ``c`` of gate
    (natural row ``c``) or up (natural row ``ffn + c``).

    Args:
        ffn: FFN width (multiple of 8).

    Returns:
        int64 ``[2 * ffn]``, a permutation of ``arange(2 * ffn)``.
    """
    if ffn % 8:
        raise ValueError(f"fc1_prepack_source_rows: ffn must be a multiple of 8, got {ffn}")
    p = np.arange(2 * ffn, dtype=np.int64)
    j = p % 16
    is_up = j // 8
    c = 8 * (p // 16) + j % 8
    return c + ffn * is_up


def fc1_prepack_rows(w: np.ndarray) -> np.ndarray:
    """Natural ``[gate; up]`` FC1 rows ``[2 * ffn, ...]`` -> prepacked row order (a new array)."""
    w = np.asarray(w)
    if w.shape[0] % 16:
        raise ValueError(f"fc1_prepack_rows: rows must be a multiple of 16, got {w.shape}")
    return w[fc1_prepack_source_rows(w.shape[0] // 2)]


def fc1_unpack_rows(p: np.ndarray) -> np.ndarray:
    """Inverse of :func:`fc1_prepack_rows`: prepacked ``[2 * ffn, ...]`` -> natural order."""
    p = np.asarray(p)
    if p.shape[0] % 16:
        raise ValueError(f"fc1_unpack_rows: rows must be a multiple of 16, got {p.shape}")
    out = np.empty_like(p)
    out[fc1_prepack_source_rows(p.shape[0] // 2)] = p
    return out


def _check_qkv_rows(w: np.ndarray, heads: int, head_dim: int, name: str) -> None:
    if w.shape[0] != 3 * heads * head_dim:
        raise ValueError(
            f"{name}: expected {3 * heads * head_dim} rows (3 x {heads} heads x {head_dim}), "
            f"got shape {w.shape}"
        )


def qkv_rows_checkpoint_to_engine(
    w: np.ndarray, heads: int = 56, head_dim: int = 128
) -> np.ndarray:
    """Checkpoint QKV row order ``[head, kind, dim]`` -> engine order ``[kind, head, dim]``.

    Checkpoint row ``h * 3 * Dh + kind * Dh + d`` becomes engine row ``kind * H * Dh + h * Dh + d``
    (kind 0 = Q, 1 = K, 2 = V). Works for weights ``[3*H*Dh, K]`` and per-row vectors ``[3*H*Dh]``.

    Returns:
        A new array of ``w``'s shape and dtype.
    """
    w = np.asarray(w)
    _check_qkv_rows(w, heads, head_dim, "qkv_rows_checkpoint_to_engine")
    rest = w.shape[1:]
    v = w.reshape((heads, 3, head_dim) + rest).swapaxes(0, 1)
    return np.ascontiguousarray(v).reshape(w.shape)


def qkv_rows_engine_to_checkpoint(
    w: np.ndarray, heads: int = 56, head_dim: int = 128
) -> np.ndarray:
    """Inverse of :func:`qkv_rows_checkpoint_to_engine` (engine ``[kind, head, dim]`` ->
    checkpoint ``[head, kind, dim]``)."""
    w = np.asarray(w)
    _check_qkv_rows(w, heads, head_dim, "qkv_rows_engine_to_checkpoint")
    rest = w.shape[1:]
    v = w.reshape((3, heads, head_dim) + rest).swapaxes(0, 1)
    return np.ascontiguousarray(v).reshape(w.shape)
