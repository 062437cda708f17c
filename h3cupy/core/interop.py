"""Device arrays in and out: CuPy arrays, torch tensors, anything with ``__cuda_array_interface__``
or DLPack.

Inside h3cupy every operand is a :class:`Tensor`: a CuPy array holding the raw bits (bf16 as
``uint16``, e4m3 and packed e2m1 as ``uint8``) plus the logical format name. This keeps the
kernels independent of which framework (and which version of it) knows which 8- and 16-bit float
dtypes. Outputs are handed back in the caller's framework: torch tensors when torch tensors came
in, CuPy arrays otherwise.
"""

from __future__ import annotations

from typing import Any

import numpy as np

try:  # ml_dtypes is a hard dependency, but keep the import error readable
    import ml_dtypes
except ImportError as exc:  # pragma: no cover
    raise ImportError("h3cupy needs ml_dtypes: pip install ml_dtypes") from exc

# logical format -> (raw numpy dtype of the bits, element size)
RAW_DTYPE: dict[str, np.dtype] = {
    "bf16": np.dtype(np.uint16),
    "e4m3": np.dtype(np.uint8),
    "uint8": np.dtype(np.uint8),
    "int32": np.dtype(np.int32),
    "int64": np.dtype(np.int64),
    "float32": np.dtype(np.float32),
}

_NP_TO_FMT = {
    np.dtype(ml_dtypes.bfloat16): "bf16",
    np.dtype(ml_dtypes.float8_e4m3fn): "e4m3",
    np.dtype(np.uint8): "uint8",
    np.dtype(np.int32): "int32",
    np.dtype(np.int64): "int64",
    np.dtype(np.float32): "float32",
    np.dtype(np.float16): "float16",
    np.dtype(np.float64): "float64",
    np.dtype(np.int16): "int16",
    np.dtype(np.uint16): "uint16",
    np.dtype(np.int8): "int8",
}

_TORCH_FMT = {
    "bfloat16": "bf16",
    "float8_e4m3fn": "e4m3",
    "uint8": "uint8",
    "int32": "int32",
    "int64": "int64",
    "float32": "float32",
    "float16": "float16",
    "float64": "float64",
    "int16": "int16",
    "int8": "int8",
}


def _is_torch(x: Any) -> bool:
    return type(x).__module__.startswith("torch") and hasattr(x, "data_ptr")


class Tensor:
    """A device operand: its address, shape, strides and logical format, and where it came from.

    CuPy operands carry their array (``raw``: the raw-bits view). torch operands are described
    from ``data_ptr()`` / ``stride()`` directly, with no ``__cuda_array_interface__`` exchange on
    the launch path (CuPy's CAI import records and waits on an event per array, which cost
    ~60 µs per operand); ``raw`` is then built on first use.
    """

    __slots__ = ("_raw", "fmt", "is_torch", "device", "obj", "ptr", "shape", "_strides", "itemsize")

    def __init__(self, raw, fmt: str, is_torch: bool, device: int, obj: Any = None):
        self._raw = raw
        self.fmt = fmt
        self.is_torch = is_torch
        self.device = device
        self.obj = obj
        if raw is not None:
            self.ptr = int(raw.data.ptr)
            self.shape = tuple(raw.shape)
            self.itemsize = int(raw.itemsize)
            self._strides = tuple(st // self.itemsize for st in raw.strides)
        else:
            self.ptr, self.shape, self.itemsize, self._strides = 0, (), 0, ()

    @classmethod
    def from_torch(cls, t, fmt: str) -> Tensor:
        """Describe a CUDA torch tensor without importing it into CuPy."""
        self = cls(None, fmt, True, t.device.index, t)
        self.ptr = int(t.data_ptr())
        self.shape = tuple(t.shape)
        self.itemsize = int(t.element_size())
        self._strides = tuple(t.stride())
        return self

    @property
    def raw(self):
        """The CuPy raw-bits view (uint16 for bf16, uint8 for e4m3), built on first use."""
        if self._raw is None and self.obj is not None:
            self._raw, _, _ = _torch_to_cupy(self.obj)
        return self._raw

    @property
    def strides(self) -> tuple[int, ...]:
        """Strides in elements."""
        return self._strides

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    def is_contiguous(self) -> bool:
        """Row-major with no gaps (dims of size 1 may have any stride; an empty tensor is
        contiguous whatever its strides, as in torch: CuPy gives ``cupy.zeros(0)`` stride 0)."""
        if 0 in self.shape:
            return True
        expected = 1
        for dim, st in zip(reversed(self.shape), reversed(self._strides), strict=True):
            if dim != 1 and st != expected:
                return False
            expected *= dim
        return True


def _torch_to_cupy(t):
    import cupy
    import torch

    fmt = _TORCH_FMT.get(str(t.dtype).removeprefix("torch."), str(t.dtype))
    if t.device.type != "cuda":
        raise ValueError(f"expected a CUDA tensor, got one on {t.device}")
    raw_dt = RAW_DTYPE.get(fmt)
    # NOTE: bf16 and fp8 go through same-size integer views: neither DLPack in every CuPy
    # version nor __cuda_array_interface__ knows those dtypes.
    if fmt == "bf16":
        t = t.view(torch.int16)
    elif fmt == "e4m3":
        t = t.view(torch.uint8)
    arr = cupy.asarray(t)
    if raw_dt is not None and arr.dtype != raw_dt:
        arr = arr.view(raw_dt)
    return arr, fmt, t.device.index


def _import_foreign(x: Any, name: str):
    """A CuPy view of a device array that comes as a bare ``__cuda_array_interface__`` or DLPack
    object. The interface's typestr has no code for bfloat16 or float8 (such arrays say ``<V2`` /
    ``|V1``, raw bytes), so those go through DLPack when the object has it and are refused with
    a readable error otherwise; a conversion CuPy refuses is reported the same way."""
    import cupy

    cai = getattr(x, "__cuda_array_interface__", None)
    typestr = str(cai.get("typestr", "")) if isinstance(cai, dict) else ""
    untyped = typestr[1:2] == "V"
    use_cai = cai is not None and not (untyped and hasattr(x, "__dlpack__"))
    if use_cai and untyped:
        raise TypeError(
            f"{name}: expected a __cuda_array_interface__ with a numeric typestr, got "
            f"{typestr!r} (untyped bytes: the interface has no bfloat16 or float8 code); pass a "
            f"torch tensor, a CuPy array (ml_dtypes.bfloat16 / float8_e4m3fn or uint8 codes), or "
            f"an object with __dlpack__"
        )
    how = "__cuda_array_interface__" if use_cai else "DLPack"
    try:
        return cupy.asarray(x) if use_cai else cupy.from_dlpack(x)
    except (TypeError, ValueError, NotImplementedError, BufferError) as exc:
        raise TypeError(
            f"{name}: expected a device array CuPy can import through {how}, got a "
            f"{type(x).__name__} it refused ({exc}); pass a torch tensor or a CuPy array instead"
        ) from exc


def as_tensor(x: Any, name: str, *, fp8_as: str | None = None) -> Tensor:
    """Wrap a device array of any supported kind.

    ``fp8_as="e4m3"`` marks a ``uint8`` operand as e4m3 codes (FP8 data may come as raw bytes).
    Raises TypeError for host arrays and unknown objects.
    """
    import cupy

    if isinstance(x, Tensor):
        return x
    if _is_torch(x):
        if x.device.type != "cuda":
            raise TypeError(
                f"{name}: expected a CUDA tensor, got one on {x.device}; move it with {name}.cuda()"
            )
        fmt = _TORCH_FMT.get(str(x.dtype).removeprefix("torch."), str(x.dtype))
        t = Tensor.from_torch(x, fmt)
    elif isinstance(x, cupy.ndarray):
        fmt = _NP_TO_FMT.get(np.dtype(x.dtype), str(x.dtype))
        raw = x.view(RAW_DTYPE[fmt]) if fmt in ("bf16", "e4m3") else x
        t = Tensor(raw, fmt, False, x.device.id, x)
    elif isinstance(x, np.ndarray):
        raise TypeError(
            f"{name}: expected a CUDA device array (cupy.ndarray or torch CUDA tensor), got a "
            f"NumPy host array; copy it to the GPU first (cupy.asarray({name}))"
        )
    elif hasattr(x, "__cuda_array_interface__") or hasattr(x, "__dlpack__"):
        return as_tensor(_import_foreign(x, name), name, fp8_as=fp8_as)
    else:
        raise TypeError(
            f"{name}: expected a CUDA device array (cupy.ndarray, torch CUDA tensor, or an object "
            f"with __cuda_array_interface__ / __dlpack__), got {type(x).__name__}"
        )
    if fp8_as == "e4m3" and t.fmt == "uint8":
        t.fmt = "e4m3"
    return t


def empty(shape: tuple[int, ...], fmt: str, like: Tensor) -> Tensor:
    """A new output in the framework of ``like`` (torch's caching allocator for torch callers)."""
    if like.is_torch:
        import torch

        tdt = {
            "bf16": torch.bfloat16,
            "e4m3": torch.float8_e4m3fn,
            "uint8": torch.uint8,
            "int32": torch.int32,
            "int64": torch.int64,
            "float32": torch.float32,
        }[fmt]
        t = torch.empty(shape, dtype=tdt, device=f"cuda:{like.device}")
        return as_tensor(t, "output")
    import cupy

    with cupy.cuda.Device(like.device):
        raw = cupy.empty(shape, dtype=RAW_DTYPE[fmt])
    return Tensor(raw, fmt, False, like.device)


def export(t: Tensor) -> Any:
    """Hand an output back: a torch tensor of the logical dtype for torch callers, else CuPy.

    CuPy arrays come back with the logical dtype when this CuPy knows it (ml_dtypes bfloat16 /
    float8_e4m3fn), and as the raw ``uint16`` / ``uint8`` bits otherwise.
    """
    if t.is_torch:
        return t.obj
    logical = {"bf16": ml_dtypes.bfloat16, "e4m3": ml_dtypes.float8_e4m3fn}.get(t.fmt)
    if logical is not None:
        try:
            return t.raw.view(logical)
        except Exception:  # this CuPy has no such dtype: raw bits
            return t.raw
    return t.raw


def current_stream_ptr(tensors: list[Tensor]) -> int:
    """torch's current stream when any operand is a torch tensor, else CuPy's current stream."""
    for t in tensors:
        if t.is_torch:
            import torch

            raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)  # what Inductor uses
            if raw is not None:
                return int(raw(t.device))
            return int(torch.cuda.current_stream(t.device).cuda_stream)
    import cupy

    return int(cupy.cuda.get_current_stream().ptr)
