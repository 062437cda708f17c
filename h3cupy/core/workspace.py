"""Scratch buffers that an op keeps for itself when the caller passes no workspace.

Two kinds of caller exist, and each gets memory that nobody else can be using at the same time:

* An eager call gets a buffer kept per (device, stream), made on the first call and grown for a
  larger request. Calls on one stream run in order, so they can share it; calls on two streams
  never share one.
* A call being captured into a CUDA graph gets a buffer that belongs to that capture: kept per
  (device, stream, capture id), so the calls one capture records on one stream (ordered in the
  graph as on the stream) share it, and no other graph or eager call ever touches it. It is made
  during the capture and kept for the life of the process, since the graph may be replayed at
  any time. The allocation runs with the thread's capture mode set to relaxed, as PyTorch's
  caching allocator does, so that a capture in the default (global) mode is not invalidated.

The ops zero what must start at zero with a memset on the stream (recorded into a graph when
captured), so neither kind needs its contents initialised here.
"""

from __future__ import annotations

import contextlib
import ctypes

import numpy as np

from .launch import libcuda, stream_for

_eager: dict[tuple[int, int], object] = {}
_captured: dict[tuple[int, int, int], object] = {}  # per (device, stream, capture id)
_retired: list = []  # captures' buffers replaced by larger ones: still in their graphs, kept


@contextlib.contextmanager
def relaxed_capture_mode():
    """Sets this thread's stream-capture mode to relaxed (cuThreadExchangeStreamCaptureMode)
    for the duration, so that cudaMalloc is legal while a stream is being captured."""
    lib = libcuda()
    mode = ctypes.c_int(2)  # CU_STREAM_CAPTURE_MODE_RELAXED
    err = lib.cuThreadExchangeStreamCaptureMode(ctypes.byref(mode))
    if err:
        raise RuntimeError(f"cuThreadExchangeStreamCaptureMode failed with CUDA error {err}")
    try:
        yield
    finally:
        lib.cuThreadExchangeStreamCaptureMode(ctypes.byref(mode))  # the previous mode back


def capture_id(stream_handle: int) -> int | None:
    """The id of the capture sequence the stream is part of, or None when it is not being
    captured (cuStreamGetCaptureInfo_v2)."""
    import cupy

    if not cupy.cuda.runtime.streamIsCapturing(stream_handle):
        return None
    status, ident = ctypes.c_int(0), ctypes.c_uint64(0)
    lib = libcuda()
    # (stream, status, id, graph, dependencies[, edge data], count): the optional outputs NULL
    for name, optional in (("cuStreamGetCaptureInfo_v2", 3), ("cuStreamGetCaptureInfo_v3", 4)):
        fn = getattr(lib, name, None)
        if fn is None:
            continue
        fn.argtypes = [ctypes.c_void_p] * (3 + optional)
        err = fn(stream_handle, ctypes.byref(status), ctypes.byref(ident), *([None] * optional))
        if err:
            raise RuntimeError(f"{name} failed with CUDA error {err}")
        return int(ident.value)
    raise RuntimeError("the CUDA driver has no cuStreamGetCaptureInfo_v2 / _v3")


def scratch_words(dev: int, stream_handle: int, words: int):
    """A uint32 device buffer of at least ``words`` elements (256-byte aligned, contents
    undefined) for one launch on ``stream_handle``: the stream's own when not capturing, the
    capture's own when capturing (see the module docstring). Allocated with the stream as CuPy's
    current one, so that CuPy's pool (free blocks kept per stream) reuses a replaced buffer only
    in that stream's order."""
    import cupy

    words = max(int(words), 1)
    ident = capture_id(stream_handle)
    if ident is not None:
        key = (dev, stream_handle, ident)
        buf = _captured.get(key)
        if buf is None or buf.size < words:
            with cupy.cuda.Device(dev), stream_for(stream_handle), relaxed_capture_mode():
                new = cupy.empty(words, np.uint32)
            if buf is not None:
                _retired.append(buf)
            buf = _captured[key] = new
        return buf
    buf = _eager.get((dev, stream_handle))
    if buf is None or buf.size < words:
        with cupy.cuda.Device(dev), stream_for(stream_handle):
            buf = cupy.empty(words, np.uint32)
        _eager[(dev, stream_handle)] = buf
    return buf


def captured_bytes() -> int:
    """Bytes held by buffers made during CUDA-graph captures (for diagnostics)."""
    return sum(int(b.nbytes) for b in [*_captured.values(), *_retired])
