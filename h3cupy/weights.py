"""Device weight helpers (SPEC.md section 7): FP8 and NVFP4 weight quantizers, the FC1 prepack,
NVFP4 global scales, ``fp4_quantize`` and the QKV row-order conversion.

Each runs on the GPU on the caller's current stream and returns device arrays in the caller's
framework; each has a NumPy twin in :mod:`h3cupy.reference` (same name) that the tests compare
against bit for bit. These run once per weight, so they allocate their outputs.
"""

from __future__ import annotations

import functools

import numpy as np

from . import formats
from .core import arch, checks, interop, jit
from .core.launch import f32, i32, i64, launch, ptr, stream

QUANTIZE = jit.ModuleSpec(
    "kernels/quantize.cu",
    (
        "h3::quantize_rows_fp8_smxx",
        "h3::absmax_bf16_smxx",
        "h3::nvfp4_global_scale_smxx",
        "h3::fp4_quantize_smxx",
        "h3::permute_rows_smxx",
        "h3::nvfp4_dequant_bf16_smxx",
        "h3::swiglu_silu_probe_smxx",
    ),
)
_THREADS = 256

D, QKV, ATTN, FFN = 5376, 21504, 7168, 14336


def _kernel(name: str, dev: int):
    target = arch.device_target(dev)
    if not arch.supports_fp8(target):
        raise RuntimeError(
            f"the FP8/NVFP4 weight helpers need sm_89 or newer; this GPU is {target}"
        )
    return jit.get_kernel(QUANTIZE, f"h3::{name}", target)


def _weight(w, name: str, shape: tuple[int, int]) -> interop.Tensor:
    t = interop.as_tensor(w, name)
    checks.check_tensor(t, name, "bf16", shape, t.device)
    return t


@functools.cache
def _device_index(key: str, dev: int):
    """Row-permutation tables, uploaded once per device."""
    import cupy

    if key == "fc1_dst":  # natural row -> prepacked row
        src = formats.fc1_prepack_source_rows(FFN)
        idx = np.empty_like(src)
        idx[src] = np.arange(src.size)
    elif key == "qkv_src":  # engine row -> checkpoint row
        idx = formats.qkv_rows_checkpoint_to_engine(np.arange(QKV, dtype=np.int64))
    else:  # pragma: no cover
        raise KeyError(key)
    with cupy.cuda.Device(dev):
        return cupy.asarray(np.ascontiguousarray(idx, dtype=np.int64))


def _quantize_rows_fp8(w, name: str, shape: tuple[int, int], dst_rows=None):
    wt = _weight(w, name, shape)
    n, k = shape
    q = interop.empty((n, k), "e4m3", like=wt)
    s = interop.empty((n,), "float32", like=wt)
    dst = None if dst_rows is None else interop.as_tensor(dst_rows, "dst_rows")
    launch(
        _kernel("quantize_rows_fp8_smxx", wt.device),
        n,
        _THREADS,
        (ptr(wt), i32(k), ptr(dst), ptr(q), ptr(s)),
        tensors=[wt, q, s],
    )
    return interop.export(q), interop.export(s)


@arch.on_operand_device("qkv_weight")
def quantize_minimax_h3_qkv_weight_fp8(qkv_weight):
    """Per-output-channel FP8 of the fused QKV weight.

    Args:
        qkv_weight: bf16 ``[21504, 5376]`` in engine row order ``[kind, head, dim]``.

    Returns:
        ``(q, scale)``: e4m3 ``[21504, 5376]`` and fp32 ``[21504]``, rows in the input's order;
        ``scale = max(amax_row, 1e-12) / 448``, ``q = e4m3(w / scale)`` (true division).
    """
    return _quantize_rows_fp8(qkv_weight, "qkv_weight", (QKV, D))


@arch.on_operand_device("o_weight")
def quantize_minimax_h3_o_weight_fp8(o_weight):
    """Per-output-channel FP8 of the attention output weight, bf16 ``[5376, 7168]`` ->
    (e4m3 ``[5376, 7168]``, fp32 ``[5376]``)."""
    return _quantize_rows_fp8(o_weight, "o_weight", (D, ATTN))


@arch.on_operand_device("fc2_weight")
def prepare_minimax_h3_fc2_weight_fp8(fc2_weight):
    """Per-output-channel FP8 of FC2, bf16 ``[5376, 14336]`` -> (e4m3 ``[5376, 14336]``,
    fp32 ``[5376]``), natural row order."""
    return _quantize_rows_fp8(fc2_weight, "fc2_weight", (D, FFN))


@arch.on_operand_device("fc1_weight")
def prepare_minimax_h3_fc1_weight_fp8(fc1_weight):
    """Per-output-channel FP8 of FC1 in the prepacked row order.

    Args:
        fc1_weight: bf16 ``[28672, 5376]``, gate rows ``[0, 14336)`` then up rows.

    Returns:
        ``(q, scale)``: e4m3 ``[28672, 5376]`` and fp32 ``[28672]`` where prepacked row
        ``16*(c//8) + c%8 + 8*is_up`` holds output column ``c`` of gate (is_up 0) or up (1).
    """
    t = _weight(fc1_weight, "fc1_weight", (2 * FFN, D))  # (checked before the index's upload)
    return _quantize_rows_fp8(
        t, "fc1_weight", (2 * FFN, D), dst_rows=_device_index("fc1_dst", t.device)
    )


def _global_scale_tensor(g, name: str, like: interop.Tensor) -> interop.Tensor:
    """A float or fp32 [1] device array -> fp32 [1] device Tensor (no host read of a device
    value)."""
    from .ops.gemm import _scalar_arg

    if g is None:  # required: as_tensor's TypeError names it
        interop.as_tensor(g, name)
    host, gt = _scalar_arg(g, name, like.device)  # (a host value checked positive and finite)
    if gt is None:
        gt = interop.empty((1,), "float32", like=like)
        with stream([like]):
            gt.raw.fill(np.float32(host))
    return gt


@arch.on_operand_device("amax")
def nvfp4_global_scale_from_amax(amax):
    """``448 * 6 / max(amax, 1e-12)`` as an fp32 ``[1]`` device array.

    Args:
        amax: a finite Python float >= 0, or a one-element fp32 device array (read on the
            device, no sync).
    """
    if isinstance(amax, (int, float, np.floating)) and not isinstance(amax, bool):
        with np.errstate(over="ignore"):
            finite32 = np.isfinite(np.float32(amax))  # (the kernel reads it as fp32)
        if not finite32 or amax < 0:
            raise ValueError(f"amax: expected a finite float >= 0 (also in fp32), got {amax!r}")
        like = interop.Tensor(None, "float32", False, arch.current_device())
        at, host = None, float(amax)
    else:
        at = interop.as_tensor(amax, "amax")
        checks.check_device_scalar(at, "amax", at.device)
        like, host = at, 0.0
    g = interop.empty((1,), "float32", like=like)
    launch(
        _kernel("nvfp4_global_scale_smxx", like.device),
        1,
        1,
        (ptr(at), f32(host), ptr(g)),
        tensors=[g] + ([at] if at is not None else []),
    )
    return interop.export(g)


def _fp4_quantize(at: interop.Tensor, gt: interop.Tensor, swizzled: bool):
    rows, k = at.shape
    q = interop.empty((rows, k // 2), "uint8", like=at)
    if swizzled:
        sf = interop.empty((formats.swizzled_sf_nbytes(rows, k // 16),), "uint8", like=at)
        with stream([at]):
            sf.raw.fill(0)  # padding bytes of the 128x4 layout are zero
    else:
        sf = interop.empty((rows, k // 16), "uint8", like=at)
    _fp4_quantize_launch(at, gt, q, sf, swizzled)
    return q, sf


def _codec_grid(rows: int, k: int, device: int) -> int:
    """The grid of the NVFP4 codec launches (``fp4_quantize_smxx``, ``nvfp4_dequant_bf16_smxx``;
    quantize.cu ``for_each_row_task``): a warp per 1024 values of a row, 8 warps per CTA,
    grid-strided beyond 16 CTAs per SM."""
    tasks = rows * -(-k // 1024)
    return max(1, min(-(-tasks // (_THREADS // 32)), 16 * arch.sm_count(device)))


def _fp4_quantize_launch(at, gt, q, sf, swizzled: bool) -> None:
    """NVFP4 of the contiguous bf16 ``at`` ``[rows, K]`` under the device global scale ``gt``
    into codes ``q`` ``[rows, K/2]`` and scales ``sf`` (linear, or 128x4-swizzled and zeroed
    first): one launch on the current stream, operands checked by the caller."""
    rows, k = at.shape
    launch(
        _kernel("fp4_quantize_smxx", at.device),
        _codec_grid(rows, k, at.device),
        _THREADS,
        (ptr(at), i64(rows), i32(k), ptr(gt), ptr(q), ptr(sf), i32(int(swizzled))),
        tensors=[at, gt, q, sf],
    )


@arch.on_operand_device("a")
def fp4_quantize(a, global_scale, sf_vec_size: int = 16, is_sf_swizzled_layout: bool = True):
    """NVFP4 quantization of a bf16 matrix (FlashInfer's ``fp4_quantize`` convention).

    Args:
        a: bf16 ``[M, K]`` contiguous, K a multiple of 16.
        global_scale: one-element fp32 device array (``[1]``) or a positive finite Python
            float ``g`` (``448*6/amax``).
        sf_vec_size: must be 16 (NVFP4).
        is_sf_swizzled_layout: scales in the 128x4 swizzled layout (flat uint8 of
            ``ceil(M/128)*128 * ceil(K/64)*4`` bytes) or linear ``[M, K/16]``.

    Returns:
        ``(q, sf)``: packed e2m1 uint8 ``[M, K/2]`` (element 2j in the low nibble) and scales.
    """
    if sf_vec_size != 16:
        raise ValueError(f"sf_vec_size: expected 16 (NVFP4), got {sf_vec_size}")
    at = interop.as_tensor(a, "a")
    checks.check_dtype(at, "a", "bf16")
    if len(at.shape) != 2 or at.shape[1] % 16 or at.shape[0] < 1:
        raise ValueError(
            f"a: expected shape [M, K] with M >= 1 and K a multiple of 16, got {list(at.shape)}"
        )
    checks.check_tensor(at, "a", "bf16", at.shape, at.device)
    gt = _global_scale_tensor(global_scale, "global_scale", at)
    q, sf = _fp4_quantize(at, gt, bool(is_sf_swizzled_layout))
    return interop.export(q), interop.export(sf)


def _absmax(at: interop.Tensor) -> interop.Tensor:
    bits = interop.empty((1,), "float32", like=at)
    with stream([at]):
        bits.raw.fill(0)
    n = at.size
    grid = max(1, min((n // 8 + _THREADS - 1) // _THREADS, 4 * 132))
    launch(
        _kernel("absmax_bf16_smxx", at.device),
        grid,
        _THREADS,
        (ptr(at), i64(n), ptr(bits)),
        tensors=[at, bits],
    )
    return bits  # fp32 bits of a non-negative float are the float


def _quantize_nvfp4_weight(w, name: str, shape: tuple[int, int]):
    wt = _weight(w, name, shape)
    amax = _absmax(wt)
    g = interop.empty((1,), "float32", like=wt)
    launch(
        _kernel("nvfp4_global_scale_smxx", wt.device),
        1,
        1,
        (ptr(amax), f32(0.0), ptr(g)),
        tensors=[amax, g],
    )
    q, sf = _fp4_quantize(wt, g, True)
    return interop.export(q), interop.export(sf), interop.export(g)


@arch.on_operand_device("qkv_weight")
def quantize_minimax_h3_qkv_weight_nvfp4(qkv_weight):
    """NVFP4 of the fused QKV weight with a per-tensor global scale.

    Args:
        qkv_weight: bf16 ``[21504, 5376]`` in engine row order.

    Returns:
        ``(q, sf, g)``: packed uint8 ``[21504, 2688]``, 128x4-swizzled ue4m3 scales (flat uint8,
        21504*336 bytes) and fp32 ``[1]`` ``g = 448*6/max(amax|W|, 1e-12)``, all on the device.
    """
    return _quantize_nvfp4_weight(qkv_weight, "qkv_weight", (QKV, D))


@arch.on_operand_device("o_weight")
def quantize_minimax_h3_o_weight_nvfp4(o_weight):
    """NVFP4 of the output weight bf16 ``[5376, 7168]`` -> (uint8 ``[5376, 3584]``, swizzled
    scales of 5376*448 bytes, fp32 ``[1]`` global scale)."""
    return _quantize_nvfp4_weight(o_weight, "o_weight", (D, ATTN))


@arch.on_operand_device("w")
def qkv_rows_checkpoint_to_engine(w):
    """Reorder fused-QKV rows from the checkpoint's per-head order (row ``h*384 + kind*128 + d``)
    to the engine order (row ``kind*7168 + h*128 + d``).

    Args:
        w: ``[21504, ...]`` contiguous, 4-byte aligned device array of any dtype whose row size
            is a multiple of 4 bytes (the bf16 weight, FP8 codes with their fp32 scales, ...).

    Returns:
        A new array of the same shape and dtype with the rows permuted.
    """
    t = interop.as_tensor(w, "w")
    if t.fmt not in interop.RAW_DTYPE:
        raise TypeError(f"w: expected bf16, e4m3, uint8, int32, int64 or float32 rows, got {t.fmt}")
    if not t.shape or t.shape[0] != QKV:
        raise ValueError(f"w: expected shape [21504, ...], got {list(t.shape)}")
    checks.check_contiguous(t, "w")
    row_bytes = t.size * t.itemsize // QKV
    if row_bytes % 4:
        raise ValueError(
            f"w: expected rows of a multiple of 4 bytes, got {row_bytes}; pass the weight or a "
            "[21504, K] code matrix"
        )
    checks.check_aligned(t, "w", 4)  # (moved in 4-byte words)
    out = interop.empty(t.shape, t.fmt, like=t)
    launch(
        _kernel("permute_rows_smxx", t.device),
        QKV,
        _THREADS,
        (ptr(t), ptr(out), i64(row_bytes // 4), ptr(_device_index("qkv_src", t.device))),
        tensors=[t, out],
    )
    return interop.export(out)
