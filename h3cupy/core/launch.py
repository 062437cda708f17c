"""Kernel launches on the caller's stream.

Arguments are passed as explicitly typed NumPy scalars so that the bytes match the kernel's
parameter list on every platform (a Python int would be passed as whatever CuPy picks).
"""

from __future__ import annotations

import ctypes
import functools
import sys

import numpy as np

from .interop import Tensor, current_stream_ptr

_SMEM_DEFAULT_LIMIT = 48 * 1024
_smem_unlocked: dict[int, int] = {}  # id(kernel) -> dynamic smem limit already set
_max_threads: dict[int, int] = {}  # id(kernel) -> max threads per block (from the cubin)


@functools.cache
def libcuda() -> ctypes.CDLL:
    """The CUDA driver library through ctypes, loaded once (OSError where there is none)."""
    return ctypes.CDLL("nvcuda.dll" if sys.platform == "win32" else "libcuda.so.1")


def ptr(t) -> np.uint64:
    """A device pointer argument from a Tensor or a CuPy array (0 for an absent operand)."""
    if t is None:
        return np.uint64(0)
    if isinstance(t, Tensor):
        return np.uint64(t.ptr)
    return np.uint64(t.data.ptr)


_streams: dict[int, object] = {}


def stream(tensors: list[Tensor]):
    """The caller's current stream as a CuPy stream object (usable as a context manager, so
    that CuPy fills and copies stay ordered with h3cupy's launches). One wrapper per stream
    handle, made once."""
    return stream_for(current_stream_ptr(tensors))


def stream_for(handle: int):
    """The CuPy stream object wrapping a raw stream handle (one per handle, made once)."""
    s = _streams.get(handle)
    if s is None:
        import warnings

        import cupy

        with warnings.catch_warnings():
            # NOTE: CuPy 14 deprecates ExternalStream in favour of Stream.from_external(obj with
            # __cuda_stream__); a raw handle from torch has no such object, and the wrapper
            # keeps the same behaviour.
            warnings.simplefilter("ignore", DeprecationWarning)
            s = _streams[handle] = cupy.cuda.ExternalStream(handle)
    return s


def i32(v: int) -> np.int32:
    return np.int32(v)


def i64(v: int) -> np.int64:
    return np.int64(v)


def f32(v: float) -> np.float32:
    return np.float32(v)


def _unlock_smem(kernel, smem: int) -> None:
    if smem > _SMEM_DEFAULT_LIMIT and _smem_unlocked.get(id(kernel), 0) < smem:
        try:
            kernel.max_dynamic_shared_size_bytes = smem
        except Exception as e:  # the driver refuses more than the device's opt-in limit
            from . import arch

            dev = arch.current_device()
            try:
                limit = str(arch.smem_optin(dev))
            except Exception:  # pragma: no cover - the query itself failed
                limit = "less"
            try:  # the kernel's static shared memory counts against the same limit
                static = int(kernel.shared_size_bytes)
            except Exception:  # pragma: no cover - the attribute query failed
                static = 0
            both = f" and {static} static, {smem + static} in all," if static else ""
            raise RuntimeError(
                f"a kernel launch needs {smem} bytes of dynamic shared memory per block{both} "
                f"and this GPU (device {dev}) allows at most {limit}: this kernel variant is "
                "not built for this GPU. Report it with the op and the GPU's name; h3cupy's "
                f"sm_120a kernels are meant to fit {arch.SM120_SMEM_LIMIT} bytes "
                f"({type(e).__name__}: {e})"
            ) from e
        _smem_unlocked[id(kernel)] = smem


class _LaunchConfig(ctypes.Structure):
    _fields_ = [
        ("grid", ctypes.c_uint * 3),
        ("block", ctypes.c_uint * 3),
        ("shared_mem", ctypes.c_uint),
        ("stream", ctypes.c_void_p),
        ("attrs", ctypes.c_void_p),
        ("num_attrs", ctypes.c_uint),
    ]


class _LaunchAttr(ctypes.Structure):
    """CUlaunchAttribute: an id, 4 bytes of padding, a 64-byte value union."""

    _fields_ = [("id", ctypes.c_int), ("pad", ctypes.c_char * 4), ("value", ctypes.c_int * 16)]


# CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION (cuda.h)
_ATTR_PROGRAMMATIC = 6

#: Programmatic dependent launch for the kernels that ask for it (``launch(..., pdl=True)``: the
#: sm_90a engine kernels, which wait (``griddepcontrol.wait``) before anything else once their
#: barriers are set up): such a launch may begin while the previous kernel in the stream (the
#: prologue, which signals its dependents on each CTA's last row) is still running, so the GEMM's
#: launch and setup overlap the prologue's tail. Off by default: on the H200 (2026-12-02, four
#: runs, benchmarks/NOTES.md session 14) the ops measured within their run-to-run spread of
#: their PDL-off forms, slightly slower at M = 4824 in every op. A module setting, for the A/B.
PDL = False

_active_clusters: dict[tuple[int, int, int], int] = {}


def max_active_clusters(kernel, cluster: int, block: int, smem: int, fallback: int) -> int:
    """How many clusters of a kernel with compile-time ``__cluster_dims__(cluster)`` can be
    resident at once (``cuOccupancyMaxActiveClusters``); sizes persistent clustered grids, since
    GPCs with an odd number of free SMs cannot host a whole cluster on every SM. ``fallback`` is
    returned if the driver cannot answer (a grid that is too large costs speed, not correctness,
    because the engine's clusters never wait on each other)."""
    key = (id(kernel), block, smem)
    got = _active_clusters.get(key)
    if got is None:
        _unlock_smem(kernel, smem)
        cfg = _LaunchConfig()
        cfg.grid[:] = (cluster, 1, 1)
        cfg.block[:] = (block, 1, 1)
        cfg.shared_mem = smem
        out = ctypes.c_int(0)
        try:
            fn = libcuda().cuOccupancyMaxActiveClusters
            rc = fn(ctypes.byref(out), ctypes.c_void_p(function_ptr(kernel)), ctypes.byref(cfg))
        except (OSError, AttributeError):  # pragma: no cover - no driver entry point
            rc = -1
        got = out.value if rc == 0 and out.value > 0 else fallback
        _active_clusters[key] = got
    return got


_CTYPE = {
    np.dtype(np.uint64): ctypes.c_uint64,
    np.dtype(np.int64): ctypes.c_int64,
    np.dtype(np.uint32): ctypes.c_uint32,
    np.dtype(np.int32): ctypes.c_int32,
    np.dtype(np.float32): ctypes.c_float,
}


class _Driver:
    """``cuLaunchKernel`` through ctypes: the launch path of every h3cupy kernel.

    NOTE: CuPy's ``Function.__call__`` costs tens of microseconds per launch with by-value
    structured arguments (the 128-byte tensor maps); packing the parameter pointers here costs a
    few. The function handle is CuPy's (``Function.ptr``), so CuPy still owns module loading.
    """

    def __init__(self):
        lib = libcuda()
        self.launch = lib.cuLaunchKernel
        self.launch.restype = ctypes.c_int
        self.launch.argtypes = (
            [ctypes.c_void_p]
            + [ctypes.c_uint] * 7
            + [
                ctypes.c_void_p,
                ctypes.POINTER(ctypes.c_void_p),
                ctypes.c_void_p,
            ]
        )
        self.launch_ex = lib.cuLaunchKernelEx
        self.launch_ex.restype = ctypes.c_int
        self.launch_ex.argtypes = [
            ctypes.c_void_p,
            ctypes.c_void_p,
            ctypes.POINTER(ctypes.c_void_p),
            ctypes.c_void_p,
        ]
        attr = _LaunchAttr()
        attr.id = _ATTR_PROGRAMMATIC
        attr.value[0] = 1  # programmaticStreamSerializationAllowed
        self.pdl_attr = attr
        self.error_name = lib.cuGetErrorName
        self.error_name.restype = ctypes.c_int
        self.error_name.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)]


_driver: _Driver | None = None
_fptr: dict[int, int] = {}  # id(kernel) -> CUfunction
_param_sizes: dict[int, tuple[int, ...] | None] = {}  # id(kernel) -> sizes from the cubin
_checked: set[int] = set()  # kernels whose first launch had its arguments checked


def kernel_param_sizes(kernel) -> tuple[int, ...] | None:
    """The byte sizes of a kernel's parameters as the loaded cubin declares them
    (``cuFuncGetParamInfo``, CUDA 12.4+ drivers), or None where the driver cannot say."""
    key = id(kernel)
    if key not in _param_sizes:
        sizes: list[int] | None = []
        try:
            fn = libcuda().cuFuncGetParamInfo
        except (OSError, AttributeError):  # pragma: no cover - older driver
            sizes = None
        else:
            off, size = ctypes.c_size_t(0), ctypes.c_size_t(0)
            func = ctypes.c_void_p(function_ptr(kernel))
            while len(sizes) <= 512:
                rc = fn(func, ctypes.c_size_t(len(sizes)), ctypes.byref(off), ctypes.byref(size))
                if rc != 0:
                    # NOTE: the index past the last parameter answers CUDA_ERROR_INVALID_VALUE (1);
                    # anything else (not supported, ...) means the driver cannot say.
                    if rc != 1:
                        sizes = None
                    break
                sizes.append(size.value)
            else:  # pragma: no cover - a driver that never says stop
                sizes = None
        _param_sizes[key] = tuple(sizes) if sizes is not None else None
    return _param_sizes[key]


def check_params(kernel, params: list) -> None:
    """Refuse a launch whose packed arguments do not match the kernel's parameter list in count
    and byte sizes (an op and its kernel out of step would otherwise read garbage silently)."""
    want = kernel_param_sizes(kernel)
    if want is None:
        return
    got = tuple(ctypes.sizeof(p) for p in params)
    if got != want:
        name = getattr(kernel, "name", None) or getattr(getattr(kernel, "kernel", None), "name", "")
        raise RuntimeError(
            f"internal error: kernel {name or '?'} takes {len(want)} parameters of sizes {want}, "
            f"the op passed {len(got)} of sizes {got}; the op and its kernel disagree"
        )


def function_ptr(kernel) -> int:
    """The driver handle (CUfunction) of a CuPy kernel: ``RawKernel.kernel.ptr`` (the loaded
    ``Function``), or ``Function.ptr``."""
    p = _fptr.get(id(kernel))
    if p is None:
        fn = kernel.kernel if hasattr(kernel, "kernel") else kernel
        p = _fptr[id(kernel)] = int(fn.ptr)
    return p


def _param(v):
    """A ctypes object holding one kernel parameter's bytes (kept alive by the caller)."""
    if isinstance(v, np.ndarray):  # a by-value struct, e.g. a TMA tensor map (0-d, structured)
        return (ctypes.c_char * v.nbytes).from_buffer_copy(v)
    ct = _CTYPE.get(np.dtype(type(v))) if isinstance(v, np.generic) else None
    if ct is None:
        raise TypeError(f"internal error: untyped kernel argument {v!r} ({type(v).__name__})")
    return ct(v.item())


def launch(
    kernel,
    grid: int | tuple[int, ...],
    block: int | tuple[int, ...],
    args: tuple,
    *,
    tensors: list[Tensor],
    smem: int = 0,
    pdl: bool = False,
) -> None:
    """Launch ``kernel`` on the current stream of the operands' framework.

    Dynamic shared memory above 48 KiB is unlocked on the kernel object the first time it is
    asked for (``cudaFuncAttributeMaxDynamicSharedMemorySize``). ``pdl`` (with :data:`PDL`):
    a programmatic dependent launch (``cuLaunchKernelEx``), only for kernels that execute
    ``griddepcontrol.wait`` before touching anything an earlier kernel writes (sm_90+).
    """
    global _driver
    _unlock_smem(kernel, smem)
    grid = (grid, 1, 1) if isinstance(grid, int) else tuple(grid) + (1,) * (3 - len(grid))
    block = (block, 1, 1) if isinstance(block, int) else tuple(block) + (1,) * (3 - len(block))
    limit = _max_threads.get(id(kernel))
    if limit is None:
        limit = _max_threads[id(kernel)] = int(kernel.max_threads_per_block)
    if block[0] * block[1] * block[2] > limit:
        raise RuntimeError(
            f"internal error: launching {block} threads per block, but the kernel was built for at "
            f"most {limit} (its __launch_bounds__); the op's block size and the kernel disagree"
        )
    if _driver is None:
        _driver = _Driver()
    params = [_param(v) for v in args]
    if id(kernel) not in _checked:
        check_params(kernel, params)
        _checked.add(id(kernel))
    ptrs = (ctypes.c_void_p * max(1, len(params)))(*[ctypes.addressof(p) for p in params])
    if pdl and PDL:
        cfg = _LaunchConfig()
        cfg.grid[:] = grid
        cfg.block[:] = block
        cfg.shared_mem = smem
        cfg.stream = current_stream_ptr(tensors)
        cfg.attrs = ctypes.addressof(_driver.pdl_attr)
        cfg.num_attrs = 1
        rc = _driver.launch_ex(ctypes.byref(cfg), ctypes.c_void_p(function_ptr(kernel)), ptrs, None)
    else:
        rc = _driver.launch(
            function_ptr(kernel), *grid, *block, smem, current_stream_ptr(tensors), ptrs, None
        )
    if rc != 0:
        name = ctypes.c_char_p()
        _driver.error_name(rc, ctypes.byref(name))
        raise RuntimeError(
            f"cuLaunchKernel failed: {name.value.decode() if name.value else rc} "
            f"(grid {grid}, block {block}, {smem} bytes of shared memory)"
        )
