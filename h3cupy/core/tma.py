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
        lib = ctypes.CDLL("libcuda.so.1")
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
    if dtype not in DTYPE:
        raise ValueError(f"dtype: expected one of {', '.join(DTYPE)}, got {dtype!r}")
    if swizzle not in SWIZZLE:
        raise ValueError(f"swizzle: expected 0, 32, 64 or 128 bytes, got {swizzle}")
    if ptr % 16 or row_stride_bytes % 16:
        raise ValueError(
            f"TMA needs a 16-byte aligned base and row stride, got {ptr:#x} and {row_stride_bytes}"
        )
    if not (1 <= box_cols <= 256 and 1 <= box_rows <= 256):
        raise ValueError(f"box dims must lie in [1, 256], got {box_cols} x {box_rows}")
    desc = np.zeros((), DESC_DTYPE)
    dims = (ctypes.c_uint64 * 2)(cols, rows)
    strides = (ctypes.c_uint64 * 1)(row_stride_bytes)
    box = (ctypes.c_uint32 * 2)(box_cols, box_rows)
    estr = (ctypes.c_uint32 * 2)(1, 1)
    rc = _encode_fn()(
        desc.ctypes.data,
        DTYPE[dtype],
        2,
        ctypes.c_void_p(ptr),
        dims,
        strides,
        box,
        estr,
        0,
        SWIZZLE[swizzle],
        _L2_PROMOTION_128B,
        0,
    )
    if rc != 0:
        raise RuntimeError(
            f"cuTensorMapEncodeTiled failed with CUresult {rc} (dtype={dtype}, dims={cols}x{rows}, "
            f"stride={row_stride_bytes}, box={box_cols}x{box_rows}, swizzle={swizzle})"
        )
    return desc
