"""Input checks: each failure names the argument, what was expected, what came, and the fix.

All checks read only shapes, strides, dtypes and pointers (O(1), no device work, no host sync).
Shape mismatches and layout problems raise ValueError; wrong dtypes raise TypeError.
"""

from __future__ import annotations

from collections.abc import Sequence

from .interop import Tensor

_FIX_DTYPE = {
    "bf16": "convert it with .to(torch.bfloat16) / .astype(ml_dtypes.bfloat16)",
    "e4m3": "pass float8_e4m3fn data (or its uint8 bytes) from the matching h3cupy quantizer",
    "uint8": "pass the uint8 bytes produced by the matching h3cupy quantizer",
    "int32": "convert the indices with .to(torch.int32) / .astype(numpy.int32)",
    "int64": "convert the indices with .to(torch.int64) / .astype(numpy.int64)",
    "float32": "convert it with .float() / .astype(numpy.float32)",
}


def _fmt_list(fmts: Sequence[str]) -> str:
    return " or ".join(fmts)


def check_dtype(t: Tensor, name: str, fmts: str | Sequence[str]) -> None:
    fmts = (fmts,) if isinstance(fmts, str) else tuple(fmts)
    if t.fmt not in fmts:
        fix = _FIX_DTYPE.get(fmts[0], f"convert it to {fmts[0]}")
        raise TypeError(f"{name}: expected dtype {_fmt_list(fmts)}, got {t.fmt}; {fix}")


def check_shape(t: Tensor, name: str, shape: Sequence[int | None], what: str = "") -> None:
    """``shape`` entries of None match any size."""
    ok = len(t.shape) == len(shape) and all(
        e is None or e == g for e, g in zip(shape, t.shape, strict=False)
    )
    if not ok:
        want = "[" + ", ".join("*" if e is None else str(e) for e in shape) + "]"
        raise ValueError(
            f"{name}: expected shape {want}{' ' + what if what else ''}, got {list(t.shape)}; "
            f"pass a tensor of that shape"
        )


def check_contiguous(t: Tensor, name: str) -> None:
    if not t.is_contiguous():
        raise ValueError(
            f"{name}: expected a contiguous (row-major) tensor, got strides {list(t.strides)} "
            f"(elements) for shape {list(t.shape)}; pass {name}.contiguous() / "
            f"cupy.ascontiguousarray({name})"
        )


def check_aligned(t: Tensor, name: str, nbytes: int = 16) -> None:
    if t.ptr % nbytes:
        raise ValueError(
            f"{name}: expected a {nbytes}-byte aligned base address, got {t.ptr:#x} "
            f"(offset {t.ptr % nbytes}); pass a freshly allocated tensor or a copy"
        )


def check_device(t: Tensor, name: str, device: int) -> None:
    if t.device != device:
        raise ValueError(
            f"{name}: expected a tensor on CUDA device {device} (the device of the first "
            f"operand), got device {t.device}; move it with .to('cuda:{device}')"
        )


def check_tensor(
    t: Tensor,
    name: str,
    fmt: str | Sequence[str],
    shape: Sequence[int | None],
    device: int,
    *,
    align: int = 16,
) -> None:
    """The common case: dtype, shape, contiguity, alignment and device."""
    check_dtype(t, name, fmt)
    check_shape(t, name, shape)
    check_contiguous(t, name)
    check_aligned(t, name, align)
    check_device(t, name, device)


def check_table(t: Tensor, name: str, width: int, device: int) -> tuple[int, int]:
    """An AdaLN-style table view ``[rows, width]``: unit column stride, row stride a multiple
    of 8 elements, 16-byte aligned base. Returns (rows, row_stride in elements)."""
    check_dtype(t, name, "bf16")
    if len(t.shape) != 2 or t.shape[1] != width or t.shape[0] < 1:
        raise ValueError(
            f"{name}: expected shape [rows, {width}] with rows >= 1, got {list(t.shape)}; pass "
            f"the table (or a column chunk of the [rows, 6*{width}] modulation projection)"
        )
    rows = t.shape[0]
    col_stride = t.strides[1]
    row_stride = t.strides[0] if rows > 1 else max(t.strides[0], width)
    if col_stride != 1:
        raise ValueError(
            f"{name}: expected unit column stride, got stride(1) = {col_stride}; pass a view "
            f"whose columns are contiguous (e.g. {name}.contiguous())"
        )
    if row_stride % 8 or row_stride < width:
        raise ValueError(
            f"{name}: expected a row stride that is a multiple of 8 elements (16 bytes) and at "
            f"least {width}, got stride(0) = {row_stride}; pass {name}.contiguous()"
        )
    check_aligned(t, name, 16)
    check_device(t, name, device)
    return rows, row_stride


def check_choice(value, name: str, choices: Sequence) -> None:
    if isinstance(value, bool) or value not in choices:
        raise ValueError(f"{name}: expected one of {', '.join(map(repr, choices))}, got {value!r}")


def check_positive_finite(value, name: str) -> float:
    import math

    try:
        v = float(value)
    except (TypeError, ValueError):
        raise TypeError(f"{name}: expected a float, got {type(value).__name__}") from None
    if not math.isfinite(v) or v <= 0:
        raise ValueError(f"{name}: expected a positive finite float, got {value!r}")
    return v


def output_or_empty(t, name: str, fmt: str, shape: Sequence[int], like: Tensor) -> Tensor:
    """A caller-supplied output / workspace checked for ``fmt`` and ``shape`` on ``like``'s
    device (e4m3 accepted as uint8 codes), or a new one in ``like``'s framework when ``t`` is
    None."""
    from . import interop

    if t is None:
        return interop.empty(tuple(shape), fmt, like=like)
    tt = interop.as_tensor(t, name, fp8_as="e4m3" if fmt == "e4m3" else None)
    check_tensor(tt, name, fmt, shape, like.device)
    return tt


def device_global_scale(value, dev: int, when: str = "") -> Tensor:
    """``act_global_scale``: a required fp32 ``[1]`` device array (read on the device, never
    synced); ``when`` completes the error's "required" (e.g. " for out_format='nvfp4'")."""
    from .interop import as_tensor

    if value is None:
        raise ValueError(
            f"act_global_scale: required{when}, got None; pass the fp32 [1] device array from "
            "nvfp4_global_scale_from_amax(amax)"
        )
    t = as_tensor(value, "act_global_scale")
    check_tensor(t, "act_global_scale", "float32", (1,), dev, align=4)
    return t
