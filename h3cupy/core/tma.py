"""Tensor maps for TMA loads (sm_90+), encoded by the CUDA driver.

NOTE: the driver's ``cuTensorMapEncodeTiled`` is called through ctypes on ``libcuda`` (the
library every CUDA program already has loaded) rather than through cuda-python: no extra
dependency, and the call is one C function with plain arguments. The 128-byte result travels to
the kernel by value as a NumPy structured scalar (a ``__grid_constant__ TmaDesc`` parameter).
"""

from __future__ import annotations

import ctypes
import functools

import numpy as np

from .launch import libcuda

#: CUtensorMapDataType values
DTYPE = {"uint8": 0, "uint16": 1, "uint32": 2, "int32": 3, "float32": 7, "bfloat16": 9}
#: CUtensorMapSwizzle values (bytes of the swizzle span)
SWIZZLE = {0: 0, 32: 1, 64: 2, 128: 3}
_L2_PROMOTION_128B = 2

#: a CUtensorMap as a kernel argument (16 x u64, 64-byte aligned)
DESC_DTYPE = np.dtype({"names": ["v"], "formats": [(np.uint64, (16,))], "aligned": True})


@functools.cache
def _encode_fn():
    try:
        lib = libcuda()
    except OSError as exc:  # pragma: no cover - only on machines without a driver
        raise RuntimeError("TMA tensor maps need the CUDA driver (libcuda.so.1)") from exc
    fn = getattr(lib, "cuTensorMapEncodeTiled", None)
    if fn is None:  # pragma: no cover
        raise RuntimeError("this CUDA driver has no cuTensorMapEncodeTiled (CUDA 12.0+ needed)")
    fn.restype = ctypes.c_int
    fn.argtypes = [
        ctypes.c_void_p,  # CUtensorMap*
        ctypes.c_int,  # data type
        ctypes.c_uint32,  # rank
        ctypes.c_void_p,  # global address
        ctypes.POINTER(ctypes.c_uint64),  # global dims (innermost first)
        ctypes.POINTER(ctypes.c_uint64),  # global strides in bytes (rank - 1, outer dims)
        ctypes.POINTER(ctypes.c_uint32),  # box dims
        ctypes.POINTER(ctypes.c_uint32),  # element strides
        ctypes.c_int,  # interleave
        ctypes.c_int,  # swizzle
        ctypes.c_int,  # L2 promotion
        ctypes.c_int,  # OOB fill (0: zeros)
    ]
    return fn


def encode_2d(
    ptr: int,
    dtype: str,
    cols: int,
    rows: int,
    row_stride_bytes: int,
    box_cols: int,
    box_rows: int,
    swizzle: int = 0,
) -> np.ndarray:
    """A 2-D tensor map of a row-major matrix ``[rows, cols]`` (``cols`` innermost), loaded in
    boxes of ``[box_rows, box_cols]``; elements past the edges read as zero.

    Returns a 0-d array of :data:`DESC_DTYPE`, to be passed as the kernel argument.
    Raises ValueError for arguments the TMA unit rejects (alignment, box sizes), RuntimeError if
    the driver refuses the encoding.
    """
    return encode(ptr, dtype, (cols, rows), (row_stride_bytes,), (box_cols, box_rows), swizzle)


def encode(
    ptr: int,
    dtype: str,
    dims: tuple[int, ...],
    strides_bytes: tuple[int, ...],
    box: tuple[int, ...],
    swizzle: int = 0,
) -> np.ndarray:
    """A tensor map of rank ``len(dims)`` (1 to 5): ``dims`` and ``box`` innermost first,
    ``strides_bytes`` the byte strides of dims 1.. (the innermost is contiguous). Loads read zeros
    past the edges; stores clip there, per dimension.
    """
    rank = len(dims)
    if dtype not in DTYPE:
        raise ValueError(f"dtype: expected one of {', '.join(DTYPE)}, got {dtype!r}")
    if swizzle not in SWIZZLE:
        raise ValueError(f"swizzle: expected 0, 32, 64 or 128 bytes, got {swizzle}")
    if not (1 <= rank <= 5) or len(box) != rank or len(strides_bytes) != rank - 1:
        raise ValueError(f"tensor map: inconsistent rank (dims {dims}, strides {strides_bytes})")
    if ptr % 16 or any(st % 16 for st in strides_bytes):
        raise ValueError(
            f"TMA needs a 16-byte aligned base and strides, got {ptr:#x} and {strides_bytes}"
        )
    if not all(1 <= b <= 256 for b in box):
        raise ValueError(f"box dims must lie in [1, 256], got {box}")
    desc = np.zeros((), DESC_DTYPE)
    c_dims = (ctypes.c_uint64 * rank)(*dims)
    c_strides = (ctypes.c_uint64 * max(1, rank - 1))(*strides_bytes)
    c_box = (ctypes.c_uint32 * rank)(*box)
    c_estr = (ctypes.c_uint32 * rank)(*([1] * rank))
    rc = _encode_fn()(
        desc.ctypes.data,
        DTYPE[dtype],
        rank,
        ctypes.c_void_p(ptr),
        c_dims,
        c_strides,
        c_box,
        c_estr,
        0,
        SWIZZLE[swizzle],
        _L2_PROMOTION_128B,
        0,
    )
    if rc != 0:
        raise RuntimeError(
            f"cuTensorMapEncodeTiled failed with CUresult {rc} (dtype={dtype}, dims={dims}, "
            f"strides={strides_bytes}, box={box}, swizzle={swizzle})"
        )
    return desc
