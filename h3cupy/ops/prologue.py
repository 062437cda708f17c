"""The shared prologue: RMSNorm + indexed AdaLN, written as bf16, per-token FP8 or NVFP4.

Math (SPEC.md section 2), for row m of x and table row i = adaln_index[m]::

    rstd = rsqrt(sum_k x_k^2 / K + eps)        fp32 accumulation
    n_k  = bf16((x_k * rstd) * w_k)
    s1_k = bf16(adaln_scale[i, k] + 1)
    a_k  = bf16(fma(n_k, s1_k, adaln_shift[i, k]))
    a    = 0 for the whole row when i is outside [0, rows)   (guarded on the device)

then, by ``out_format``:

* ``"bf16"``: ``a`` itself, bf16 ``[M, K]``;
* ``"fp8"``: per-token FP8, ``s = max(amax|a|, 1e-12) / 448``, codes ``e4m3(a / s)`` (true
  division): e4m3 ``[M, K]`` + fp32 ``[M]``;
* ``"nvfp4"``: NVFP4 blocks of 16 with the device global scale ``act_global_scale[0]``: packed e2m1
  uint8 ``[M, K/2]`` + linear ue4m3 scales uint8 ``[M, K/16]``.

One launch, one CTA per row; no host sync; no allocation when every output is supplied.
"""

from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple

import numpy as np

from ..core import arch, checks, interop, jit
from ..core.launch import f32, i32, i64, launch, ptr

D = 5376
_OUT_CODES = {"bf16": 0, "fp8": 1, "nvfp4": 2}
_INDEX_CTYPES = {"int32": "int", "int64": "long long"}

PROLOGUE = jit.ModuleSpec(
    "kernels/prologue.cu",
    tuple(
        f"h3::prologue_smxx<{D}, {code}, {ctype}>"
        for code in _OUT_CODES.values()
        for ctype in _INDEX_CTYPES.values()
    ),
)
_THREADS = ((D // 16 + 31) // 32) * 32  # one thread per 16 columns (PrologueShape in the kernel)
#: CTAs per SM of the persistent prologue (each CTA walks rows with a one-row register prefetch
#: of x): None (auto: 3 on sm_90a, 2 elsewhere), 3 (sm_90a only: 55-56 registers, three rows in
#: flight per SM; FP8 / NVFP4 7% / 6% faster than 2 at M = 38592 on the H200, 2026-12-01; other
#: targets spill at that register cap) or 2 (67-69 registers). The grid is this many CTAs per SM.
#: A module setting, so that tests and benchmarks can run both.
CTAS_PER_SM = None


#: The same kernels built for three resident CTAs per SM (``CTAS_PER_SM = 3``).
PROLOGUE_CTAS3 = dataclasses.replace(PROLOGUE, defines=("H3_PROLOGUE_CTAS_PER_SM=3",))


def prologue_spec(ctas_per_sm: int) -> jit.ModuleSpec:
    """The prologue module compiled for ``ctas_per_sm`` resident CTAs per SM (2 or 3)."""
    specs = {2: PROLOGUE, 3: PROLOGUE_CTAS3}
    if ctas_per_sm not in specs:
        raise ValueError(f"CTAS_PER_SM: expected 2, 3 or None (auto), got {ctas_per_sm}")
    return specs[ctas_per_sm]


def ctas_per_sm(target: str) -> int:
    """The prologue's CTAs per SM on ``target``: :data:`CTAS_PER_SM`, or by default 3 on sm_90a
    and 2 elsewhere."""
    if CTAS_PER_SM is None:
        return 3 if target == "sm_90a" else 2
    if CTAS_PER_SM == 3 and target != "sm_90a":
        raise ValueError(
            f"CTAS_PER_SM: 3 is built for sm_90a only, this GPU is {target}; set 2 or None (auto)"
        )
    prologue_spec(CTAS_PER_SM)  # validates the value
    return CTAS_PER_SM


class NormAdalnOutput(NamedTuple):
    """``a``: bf16 activation (None unless asked for in a quantized mode); ``q``: e4m3 codes or
    packed e2m1 (None for bf16); ``scale``: fp32 per-token scales or ue4m3 block scales."""

    a: Any
    q: Any
    scale: Any


def check_prologue_inputs(
    x, x_norm_weight, adaln_scale, adaln_shift, adaln_index
) -> tuple[interop.Tensor, ...]:
    """Wrap and validate the five prologue operands; returns them as Tensors plus
    (rows, row stride) of the tables."""
    xt = interop.as_tensor(x, "x")
    dev = xt.device
    checks.check_dtype(xt, "x", "bf16")
    checks.check_shape(xt, "x", (None, D), "(tokens x hidden 5376)")
    m = xt.shape[0]
    if m < 1 or m > 2**31 - 1:
        raise ValueError(f"x: expected 1 <= M < 2^31 rows, got M = {m}")
    checks.check_tensor(xt, "x", "bf16", (m, D), dev)
    wt = interop.as_tensor(x_norm_weight, "x_norm_weight")
    checks.check_tensor(wt, "x_norm_weight", "bf16", (D,), dev)
    st = interop.as_tensor(adaln_scale, "adaln_scale")
    ht = interop.as_tensor(adaln_shift, "adaln_shift")
    rows, stride = checks.check_table(st, "adaln_scale", D, dev)
    rows_h, stride_h = checks.check_table(ht, "adaln_shift", D, dev)
    if (rows_h, stride_h) != (rows, stride):
        raise ValueError(
            f"adaln_shift: expected the same rows and row stride as adaln_scale ({rows}, "
            f"{stride}), got ({rows_h}, {stride_h}); pass two chunks of one modulation "
            "projection, or two tables of one layout"
        )
    it = interop.as_tensor(adaln_index, "adaln_index")
    checks.check_tensor(it, "adaln_index", ("int32", "int64"), (m,), dev, align=it.itemsize)
    return xt, wt, st, ht, it, rows, stride


def prologue_reads(xt, wt, st, ht, it) -> list:
    """The prologue operands as (name, Tensor) pairs, for checks.check_disjoint."""
    return [
        ("x", xt),
        ("x_norm_weight", wt),
        ("adaln_scale", st),
        ("adaln_shift", ht),
        ("adaln_index", it),
    ]


def operand_args(xt, wt, st, ht, it, rows, stride) -> tuple:
    """The prologue's operands as kernel arguments, in the order its kernels take them (the
    prologue kernel, and the BF16 pre-attention's single-launch kernels): x, the norm weight,
    the two tables, their row stride and row count, the index."""
    return (ptr(xt), ptr(wt), ptr(st), ptr(ht), i64(stride), i64(rows), ptr(it))


def in_launch_args(xt, wt, st, ht, it, rows, stride, eps, out, ready_ptr: int) -> tuple:
    """The trailing kernel arguments of a single-launch GEMM that writes the prologue's rows
    itself (h3/norm_rows.cuh ProNormRows: the BF16 and FP8 pre-attention's and the MLP's FC1
    kernels): the prologue's operands, whether the index is int64, eps, the output ``out`` (bf16
    ``a`` or the e4m3 codes; the FP8 scales go through the kernel's own scale argument) and the
    address of the ready counters (``ready_ptr``, one zeroed word per 128-row tile)."""
    return (
        *operand_args(xt, wt, st, ht, it, rows, stride),
        i32(1 if it.fmt == "int64" else 0),
        f32(eps),
        ptr(out),
        np.uint64(ready_ptr),
    )


def launch_prologue(xt, wt, st, ht, it, rows, stride, eps, out_format, at, qt, sct, gt) -> None:
    """Launch the prologue kernel on checked operands (see :func:`norm_adaln`; the ops call this
    after validating all of their inputs, so that a bad argument never leaves half the work
    done)."""
    dev, m = xt.device, xt.shape[0]
    name = f"h3::prologue_smxx<{D}, {_OUT_CODES[out_format]}, {_INDEX_CTYPES[it.fmt]}>"
    target = arch.device_target(dev)
    ctas = ctas_per_sm(target)
    kernel = jit.get_kernel(prologue_spec(ctas), name, target)
    tensors = [xt, wt, st, ht, it] + [t for t in (at, qt, sct, gt) if t is not None]
    launch(
        kernel,
        min(m, ctas * arch.sm_count(dev)),
        _THREADS,
        (
            *operand_args(xt, wt, st, ht, it, rows, stride),
            f32(eps),
            i64(m),
            ptr(at),
            ptr(qt),
            ptr(sct),
            ptr(gt),
        ),
        tensors=tensors,
    )


@arch.on_operand_device("x")
def norm_adaln(
    x,
    x_norm_weight,
    adaln_scale,
    adaln_shift,
    adaln_index,
    *,
    eps: float = 1e-5,
    out_format: str = "bf16",
    act_global_scale=None,
    a=None,
    q=None,
    scale=None,
    write_bf16: bool = False,
) -> NormAdalnOutput:
    """RMSNorm + indexed AdaLN of ``x``, written as bf16, per-token FP8 or NVFP4.

    Args:
        x: bf16 ``[M, 5376]`` contiguous hidden states.
        x_norm_weight: bf16 ``[5376]`` RMSNorm weight.
        adaln_scale, adaln_shift: bf16 ``[rows, 5376]`` tables (rows >= 1), unit column stride,
            one shared row stride that is a multiple of 8 elements, 16-byte aligned base; column
            chunks of a ``[rows, 6*5376]`` modulation projection are taken as they are.
        adaln_index: int32 or int64 ``[M]``; an index outside ``[0, rows)`` gives a zero row.
        eps: RMSNorm epsilon (positive, finite).
        out_format: ``"bf16"``, ``"fp8"`` or ``"nvfp4"``.
        act_global_scale: one-element fp32 device array (``[1]``), the NVFP4 global scale
            (``"nvfp4"`` only).
        a: optional bf16 ``[M, 5376]`` output for the activation (required storage in ``"bf16"``
            mode; in quantized modes it is written only when given or ``write_bf16``).
        q: optional output codes: e4m3 ``[M, 5376]`` (fp8) or uint8 ``[M, 2688]`` (nvfp4).
        scale: optional output scales: fp32 ``[M]`` (fp8) or uint8 ``[M, 336]`` (nvfp4, linear).
        write_bf16: in a quantized mode, also return the bf16 activation (allocated if ``a`` is
            None).

    ``a``, ``q`` and ``scale`` must not share memory with each other or with any input
    (ValueError naming both).

    Returns:
        NormAdalnOutput(a, q, scale) in the caller's framework (torch in, torch out).
    """
    checks.check_choice(out_format, "out_format", tuple(_OUT_CODES))
    eps = checks.check_positive_finite(eps, "eps")
    xt, wt, st, ht, it, rows, stride = check_prologue_inputs(
        x, x_norm_weight, adaln_scale, adaln_shift, adaln_index
    )
    dev, m = xt.device, xt.shape[0]
    target = arch.device_target(dev)
    if out_format != "bf16" and not arch.supports_fp8(target):
        raise RuntimeError(
            f"out_format={out_format!r} needs an sm_89 or newer GPU; this one is {target}"
        )

    at = qt = sct = gt = None
    if out_format == "bf16" or a is not None or write_bf16:
        at = checks.output_or_empty(a, "a", "bf16", (m, D), xt)
    if out_format == "fp8":
        qt = checks.output_or_empty(q, "q", "e4m3", (m, D), xt)
        sct = checks.output_or_empty(scale, "scale", "float32", (m,), xt)
    elif out_format == "nvfp4":
        gt = checks.device_global_scale(act_global_scale, dev, " for out_format='nvfp4'")
        qt = checks.output_or_empty(q, "q", "uint8", (m, D // 2), xt)
        sct = checks.output_or_empty(scale, "scale", "uint8", (m, D // 16), xt)
    checks.check_disjoint(
        [
            ("a", at if a is not None else None),
            ("q", qt if q is not None else None),
            ("scale", sct if scale is not None else None),
        ],
        [*prologue_reads(xt, wt, st, ht, it), ("act_global_scale", gt)],
    )

    launch_prologue(xt, wt, st, ht, it, rows, stride, eps, out_format, at, qt, sct, gt)
    return NormAdalnOutput(*(interop.export(t) if t is not None else None for t in (at, qt, sct)))
