"""Input checks: each failure names the argument, what was expected, what came, and the fix.

All checks read only shapes, strides, dtypes and pointers (O(1), no device work, no host sync).
Shape mismatches and layout problems raise ValueError; wrong dtypes raise TypeError.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

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
    """``value`` one of ``choices`` and of their kind: an int setting refuses ``2.0`` and
    ``True`` (both compare equal to a choice), a string setting refuses anything but a str."""
    import numbers

    kinds = tuple({str if isinstance(c, str) else numbers.Integral for c in choices})
    typed = isinstance(value, kinds) and not isinstance(value, bool)
    if not typed or value not in choices:
        raise ValueError(f"{name}: expected one of {', '.join(map(repr, choices))}, got {value!r}")


def fp32_positive_finite(v: float) -> bool:
    """Whether ``v`` stays positive and finite once rounded to fp32, as the kernels take it (a
    float64 ``1e39`` becomes inf there and ``1e-50`` becomes 0)."""
    import math

    with np.errstate(over="ignore", under="ignore"):
        f = float(np.float32(v))
    return math.isfinite(f) and f > 0


def check_positive_finite(value, name: str) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise TypeError(f"{name}: expected a float, got {type(value).__name__}") from None
    if not fp32_positive_finite(v):
        raise ValueError(
            f"{name}: expected a positive finite float (also in fp32, as the kernels read it: "
            f"between ~1.4e-45 and ~3.4e38), got {value!r}"
        )
    return v


def check_device_scalar(t: Tensor, name: str, device: int) -> None:
    """A device scalar: one fp32 element (shape ``[1]``, ``[]``, ``[1, 1]``, ...), read by the
    kernels as one 4-byte word on ``device``."""
    check_dtype(t, name, "float32")
    if t.size != 1:
        raise ValueError(
            f"{name}: expected a one-element fp32 device array, got shape {list(t.shape)}; pass "
            f"an fp32 [1] array (or a Python float where the argument takes one)"
        )
    check_aligned(t, name, 4)
    check_device(t, name, device)


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
    """``act_global_scale``: a required one-element fp32 device array (read on the device, never
    synced); ``when`` completes the error's "required" (e.g. " for out_format='nvfp4'")."""
    from .interop import as_tensor

    if value is None:
        raise ValueError(
            f"act_global_scale: required{when}, got None; pass the fp32 [1] device array from "
            "nvfp4_global_scale_from_amax(amax)"
        )
    t = as_tensor(value, "act_global_scale")
    check_device_scalar(t, "act_global_scale", dev)
    return t


def _touches(t: Tensor, a: int, b: int) -> bool:
    """Whether an element of ``t`` lies in bytes ``[a, b)``, given that ``t``'s span meets it:
    exact for a row view ``[rows, w]`` with unit column stride (a column chunk of a table, whose
    rows leave gaps), the span otherwise (any other layout counts as its whole span)."""
    if len(t.shape) != 2 or t.strides[1] != 1 or t.strides[0] < t.shape[1]:
        return True
    rs, w = t.strides[0] * t.itemsize, t.shape[1] * t.itemsize
    r_min = max(0, (a - t.ptr - w) // rs + 1)
    r_max = min(t.shape[0] - 1, -(-(b - t.ptr) // rs) - 1)
    return r_min <= r_max


def check_disjoint(
    written: Sequence[tuple[str, Tensor | None]],
    read: Sequence[tuple[str, Tensor | None]],
    aliases: Sequence[tuple[str, str]] = (),
) -> None:
    """Refuse a written operand (an output or a workspace; contiguous) whose memory meets any
    other operand's: the kernels read and write those in parallel, so a partial overlap is a
    race with no defined result. Operands that are only read may overlap freely (``x`` may be
    ``residual``; the AdaLN and gate tables may be column chunks of one projection). An
    ``aliases`` pair (written name, other name) is allowed when both are the same view (address,
    shape, strides and format), as SPEC.md documents for ``out`` and ``residual``.

    The byte spans are sorted and, when two meet, swept pair by pair (0.4-1 us of host time per
    operand on a 2-core CI machine). None entries (omitted operands) are skipped."""
    ops: list[tuple[str, Tensor, bool, tuple[int, int]]] = []  # (name, tensor, written, span)
    spans: list[tuple[int, int, int]] = []
    for group, is_written in ((written, True), (read, False)):
        for n, t in group:
            if t is None:
                continue
            lo = hi = 0
            for d, s in zip(t.shape, t._strides):  # noqa: B905 (one stride per dimension)
                if s < 0:
                    lo += (d - 1) * s
                else:
                    hi += (d - 1) * s
            e = t.itemsize
            span = (t.ptr + lo * e, t.ptr + (hi + 1) * e)
            if 0 not in t.shape:  # an empty operand touches nothing
                spans.append((*span, len(ops)))
            ops.append((n, t, is_written, span))
    spans.sort()
    # the common case: no two spans meet (one pass); otherwise the sweep looks at each pair
    end = 0
    for lo, hi, _ in spans:
        if lo < end:
            break
        end = hi
    else:
        return
    active: list[tuple[int, int, int]] = []  # (hi, lo, index) of spans begun before this one
    for lo, hi, i in spans:
        if active:
            active = [a for a in active if a[0] > lo]
            for h, lo_j, j in active:
                if ops[i][2] or ops[j][2]:
                    _check_pair(ops[i], ops[j], max(lo, lo_j), min(hi, h), aliases)
        active.append((hi, lo, i))


def _check_pair(x, y, a: int, b: int, aliases) -> None:
    """Two operands whose spans meet in ``[a, b)``: refuse unless neither is written, they are
    a permitted alias, or a row view's gaps hold the other (exact for unit column strides)."""
    if not x[2]:  # the written one first
        x, y = y, x
    (nx, tx, _, sx), (ny, ty, _, sy) = x, y
    allowed = (nx, ny) in aliases or (ny, nx) in aliases
    if allowed and (tx.ptr, tx.shape, tx.strides, tx.itemsize) == (
        ty.ptr,
        ty.shape,
        ty.strides,
        ty.itemsize,
    ):
        return
    # the written operand is contiguous (checked before): it covers its whole span
    if not _touches(ty, a, b):
        return
    how = f"pass {ny} itself or a separate buffer" if allowed else "pass a separate buffer"
    raise ValueError(
        f"{nx}: expected memory disjoint from {ny}"
        f"{' (or ' + ny + ' itself, the same view)' if allowed else ''}, got bytes "
        f"[{sx[0]:#x}, {sx[1]:#x}) overlapping {ny}'s [{sy[0]:#x}, {sy[1]:#x}); {how} for {nx}"
    )


def given(names: Sequence[str], args: Sequence, tensors: Sequence) -> list:
    """``(name, tensor)`` pairs for check_disjoint's written side: the tensor where the caller
    passed the argument, None where the op allocated it (fresh memory meets nothing)."""
    return [(n, t if a is not None else None) for n, a, t in zip(names, args, tensors, strict=True)]
