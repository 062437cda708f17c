"""The input checks of every public entry point, on any machine (no GPU needed): the six
operators, the quantizers and weight helpers, and the GEMM engine's entry points. A bad argument
is refused, before any device work, with an error that names it and says what was expected and
what came; a good set of arguments passes every check.

The operands are descriptions of device arrays (``h3cupy.core.interop.Tensor`` with an address,
shape, strides and format, never backed by memory): the checks read only those. Stand-ins mark
the end of the checks, so that nothing runs on a device even where there is one: the first
kernel lookup (``jit.get_kernel``), allocation (``interop.empty``; the operators' valid calls
supply every output and workspace, so none should happen there), TMA descriptor, upload of a
row table, or use of an operand's memory raises :class:`ReachedDevice`. ``arch.device_target``
answers the target under test (sm_90a, or sm_120a for the mma.sync back end's checks), and the
SM count and shared-memory size are an H100's / H200's.

The GPU suite's ``test_*_errors`` tests run a few of the same refusals on real arrays, and the
flags' length against the launch plan (which needs the kernels).
"""

from __future__ import annotations

import contextlib
import inspect
import re
from collections.abc import Callable
from typing import NamedTuple

import numpy as np
import pytest

import h3cupy
from h3cupy import weights
from h3cupy.core import arch, interop, jit, tma
from h3cupy.core.interop import Tensor
from h3cupy.ops import gemm

D = 5376  # hidden size
QKV = 21504  # 3 kinds x 56 heads x 128
O_IN = 7168  # attention output width (the O projection's K)
FFN = 14336
HEADS = 56
#: the valid calls' workspace_flags length: more than minimax_h3_*_flags(M) asks at any M here
#: (the helpers plan the launch, which needs the kernels: the length check is the GPU suite's)
FLAGS = 1 << 24


class ReachedDevice(Exception):
    """The call got past its checks: it asked for a kernel, an allocation or an operand's
    memory."""


class _NoMemory:
    """An operand's ``raw`` array: any use of it is device work."""

    def __getattr__(self, name):
        raise ReachedDevice(f"operand memory used (.{name})")

    def __getitem__(self, key):
        raise ReachedDevice("operand memory used ([...])")


class Fakes:
    """Device-array descriptions at distinct, 256-byte aligned (fake) addresses."""

    def __init__(self):
        self.next = 1 << 32

    def __call__(self, shape, fmt, *, strides=None, offset=0, device=0) -> Tensor:
        t = Tensor(None, fmt, False, device)
        t.shape = tuple(int(d) for d in shape)
        t.itemsize = np.dtype(interop.RAW_DTYPE.get(fmt, fmt)).itemsize
        if strides is None:
            strides, acc = [], 1
            for d in reversed(t.shape):
                strides.insert(0, acc)
                acc *= max(d, 1)
        t._strides = tuple(strides)
        extent = 1 + sum((d - 1) * s for d, s in zip(t.shape, t._strides, strict=True) if d)
        t.ptr = self.next + offset
        self.next += -(-extent * t.itemsize // 256) * 256 + 256
        t._raw = _NoMemory()
        return t


@pytest.fixture
def device_stub(monkeypatch):
    """Stand-ins for the device (see the module docstring); yields a setter for the target."""
    state = {"target": "sm_90a"}

    def get_kernel(*a, **k):
        raise ReachedDevice("jit.get_kernel")

    def empty(*a, **k):
        raise ReachedDevice("interop.empty (an allocation)")

    def device_index(*a, **k):
        raise ReachedDevice("weights._device_index (an upload)")

    def tma_encode(*a, **k):
        raise ReachedDevice("a TMA descriptor")

    monkeypatch.setattr(arch, "device_target", lambda device_id=None: state["target"])
    # the entry points make their first operand's device current (arch.on_operand_device)
    monkeypatch.setattr(arch, "device_scope", lambda dev: contextlib.nullcontext())
    monkeypatch.setattr(arch, "current_device", lambda: 0)
    # an H100's / H200's figures (the engine's plans size grids and stages from them)
    monkeypatch.setattr(arch, "sm_count", lambda device_id: 132)
    monkeypatch.setattr(arch, "smem_optin", lambda device_id: 232448)
    monkeypatch.setattr(tma, "encode", tma_encode)
    monkeypatch.setattr(tma, "encode_2d", tma_encode)
    monkeypatch.setattr(jit, "get_kernel", get_kernel)
    monkeypatch.setattr(interop, "empty", empty)
    monkeypatch.setattr(weights, "_device_index", device_index)
    return state


# ---------------------------------------------------------------------------------------------
# A valid call of each operator: every operand, output and workspace supplied
# ---------------------------------------------------------------------------------------------


def _prologue(f: Fakes, m: int, index: str = "int64", table_stride: int = D) -> dict:
    # the AdaLN tables as column chunks of a [9, 6 * 5376] modulation projection when
    # table_stride > D (SPEC: strided table views are allowed)
    return {
        "x": f((m, D), "bf16"),
        "x_norm_weight": f((D,), "bf16"),
        "adaln_scale": f((9, D), "bf16", strides=(table_stride, 1)),
        "adaln_shift": f((9, D), "bf16", strides=(table_stride, 1)),
        "adaln_index": f((m,), index),
    }


def _heads(f: Fakes, m: int) -> dict:
    return {
        "q_norm_weight": f((128,), "bf16"),
        "k_norm_weight": f((128,), "bf16"),
        "rope_cos_sin": f((max(m, 4096), 96), "bf16"),
    }


def _qkv_outputs(f: Fakes, m: int, out_mode: str) -> dict:
    if out_mode == "nvfp4":
        d = {n: f((m, HEADS, 64), "uint8") for n in "qkv"}
        d.update({f"{n}_sf": f((m, HEADS, 8), "uint8") for n in "qkv"})
        d.update({f"{n}_global_scale": f((1,), "float32") for n in "qkv"})
        return d
    fmt = "bf16" if out_mode == "bf16" else "e4m3"
    d = {n: f((m, HEADS, 128), fmt) for n in "qkv"}
    if out_mode == "e4m3":
        d.update({f"{n}_descale": f((1,), "float32") for n in "qkv"})
    return d


def bf16_pre_attention(f: Fakes, m: int, *, p: int = 2, index: str = "int64", **kw) -> dict:
    return {
        **_prologue(f, m, index, **kw),
        "qkv_weight": f((QKV, D), "bf16"),
        **_heads(f, m),
        "ulysses_degree": p,
        "out": f((p, m, HEADS // p, 3, 128), "bf16"),
        "rope_positions": f((m,), index),
        "workspace": f((m, D), "bf16"),
        "eps": 1e-5,
        "qk_eps": 1e-6,
    }


def fp8_pre_attention(f: Fakes, m: int, *, out_mode: str = "e4m3", index="int64", **kw) -> dict:
    return {
        **_prologue(f, m, index, **kw),
        "qkv_weight_q": f((QKV, D), "e4m3"),
        "qkv_weight_scale": f((QKV,), "float32"),
        **_heads(f, m),
        "out_mode": out_mode,
        **_qkv_outputs(f, m, out_mode),
        "act_q": f((m, D), "e4m3"),
        "act_scale": f((m,), "float32"),
        "eps": 1e-5,
    }


def nvfp4_pre_attention(f: Fakes, m: int, *, out_mode: str = "nvfp4", index="int64", **kw) -> dict:
    return {
        **_prologue(f, m, index, **kw),
        "qkv_weight_q": f((QKV, D // 2), "uint8"),
        "qkv_weight_sf": f((QKV * D // 16,), "uint8"),
        "qkv_weight_global_scale": f((1,), "float32"),
        "act_global_scale": f((1,), "float32"),
        **_heads(f, m),
        "out_mode": out_mode,
        "alpha": f((1,), "float32"),
        **_qkv_outputs(f, m, out_mode),
        "act_q": f((m, D // 2), "uint8"),
        "act_sf": f((m, D // 16), "uint8"),
        "workspace_a": f((m, D), "bf16"),
        "workspace_w": f((QKV, D), "bf16"),
        "eps": 1e-5,
    }


def _gated(f: Fakes, m: int, index: str) -> dict:
    return {
        "gate": f((9, D), "bf16"),
        "gate_index": f((m,), index),
        "residual": f((m, D), "bf16"),
    }


def fp8_out_proj(f: Fakes, m: int, *, index: str = "int32") -> dict:
    return {
        "attn_out": f((m, O_IN), "bf16"),
        "o_weight_q": f((D, O_IN), "e4m3"),
        "o_weight_scale": f((D,), "float32"),
        **_gated(f, m, index),
        "out": f((m, D), "bf16"),
        "act_q": f((m, O_IN), "e4m3"),
        "act_scale": f((m,), "float32"),
        "workspace_flags": f((FLAGS,), "int32"),
    }


def nvfp4_out_proj(f: Fakes, m: int, *, index: str = "int32") -> dict:
    return {
        "attn_out": f((m, O_IN), "bf16"),
        "o_weight_q": f((D, O_IN // 2), "uint8"),
        "o_weight_sf": f((D * O_IN // 16,), "uint8"),
        "o_weight_global_scale": f((1,), "float32"),
        "act_global_scale": f((1,), "float32"),
        **_gated(f, m, index),
        "out": f((m, D), "bf16"),
        "act_q": f((m, O_IN // 2), "uint8"),
        "act_sf": f((m, O_IN // 16), "uint8"),
        "workspace_a": f((m, O_IN), "bf16"),
        "workspace_w": f((D, O_IN), "bf16"),
    }


def mlp(f: Fakes, m: int, *, index: str = "int64", **kw) -> dict:
    pro = _prologue(f, m, index, **kw)
    return {
        **pro,
        "gate": f((9, D), "bf16"),
        "residual": f((m, D), "bf16"),
        "fc1_weight_q": f((2 * FFN, D), "e4m3"),
        "fc1_weight_scale": f((2 * FFN,), "float32"),
        "fc2_weight_q": f((D, FFN), "e4m3"),
        "fc2_weight_scale": f((D,), "float32"),
        "out": f((m, D), "bf16"),
        "workspace_a_q": f((m, D), "e4m3"),
        "workspace_a_scale": f((m,), "float32"),
        "workspace_y": f((m, FFN), "bf16"),
        "workspace_y_q": f((m, FFN), "e4m3"),
        "workspace_y_scale": f((m,), "float32"),
        "workspace_flags": f((FLAGS,), "int32"),
        "eps": 1e-5,
        "fp8_mma_form": -1,
    }


def fp4_quantize(f: Fakes, m: int, **kw) -> dict:
    return {"a": f((m, D), "bf16"), "global_scale": f((1,), "float32")}


_ALLOC = "interop.empty (an allocation)"


class Op(NamedTuple):
    fn: Callable
    valid: Callable[..., dict]
    first: str  # the operand whose device the others must share
    reaches: str | None = "jit.get_kernel"  # where a valid call's device work starts (None:
    # anywhere: the engine's entry points plan their own workspaces and descriptors)
    targets: tuple[str, ...] = ("sm_90a", "sm_120a")  # where it runs


OPS = {
    "bf16_pre_attention": Op(h3cupy.minimax_h3_bf16_pre_attention, bf16_pre_attention, "x"),
    "fp8_pre_attention": Op(h3cupy.minimax_h3_fp8_pre_attention, fp8_pre_attention, "x"),
    "nvfp4_pre_attention": Op(h3cupy.minimax_h3_nvfp4_pre_attention, nvfp4_pre_attention, "x"),
    "fp8_out_proj": Op(h3cupy.minimax_h3_fp8_out_proj, fp8_out_proj, "attn_out"),
    "nvfp4_out_proj": Op(h3cupy.minimax_h3_nvfp4_out_proj, nvfp4_out_proj, "attn_out"),
    "mlp_fp8": Op(h3cupy.minimax_h3_mlp_fp8_sm120, mlp, "x"),
    # the activation quantizer and the weight helpers: they return new arrays, so an
    # allocation (or FC1's row table's upload) is their first device work
    "fp4_quantize": Op(h3cupy.fp4_quantize, fp4_quantize, "a", _ALLOC),
    "nvfp4_global_scale_from_amax": Op(
        h3cupy.nvfp4_global_scale_from_amax,
        lambda f, m, **kw: {"amax": f((1,), "float32")},
        "amax",
        _ALLOC,
    ),
    "qkv_rows_checkpoint_to_engine": Op(
        h3cupy.qkv_rows_checkpoint_to_engine,
        lambda f, m, **kw: {"w": f((QKV, D), "bf16")},
        "w",
        _ALLOC,
    ),
}


def _gemm(fmt: str):
    def build(f: Fakes, m: int, **kw) -> dict:
        code = "bf16" if fmt == "bf16" else "e4m3"
        args = {"a": f((m, D), code), "b": f((QKV, D), code), "fmt": fmt}
        if fmt == "e4m3":
            args.update(row_scale=f((m,), "float32"), col_scale=f((QKV,), "float32"))
        return {**args, "out": f((m, QKV), "bf16")}

    return build


def gemm_nvfp4(f: Fakes, m: int, **kw) -> dict:
    return {
        "a_q": f((m, D // 2), "uint8"),
        "a_sf": f((m, D // 16), "uint8"),
        "b_q": f((QKV, D // 2), "uint8"),
        "b_sf": f((QKV * D // 16,), "uint8"),
        "alpha": 1.0,
        "out": f((m, QKV), "bf16"),
    }


# the GEMM engine's entry points (h3cupy.ops.gemm)
OPS["gemm_wgmma"] = Op(gemm.gemm_wgmma, _gemm("bf16"), "a", None, ("sm_90a",))
OPS["gemm_wgmma_e4m3"] = Op(gemm.gemm_wgmma, _gemm("e4m3"), "a", None, ("sm_90a",))
OPS["gemm_mma_tma"] = Op(gemm.gemm_mma_tma, _gemm("bf16"), "a", None)
OPS["gemm_nvfp4"] = Op(gemm.gemm_nvfp4, gemm_nvfp4, "a_q", None)

for _name, (_param, _shape) in {
    "quantize_minimax_h3_qkv_weight_fp8": ("qkv_weight", (QKV, D)),
    "quantize_minimax_h3_o_weight_fp8": ("o_weight", (D, O_IN)),
    "prepare_minimax_h3_fc1_weight_fp8": ("fc1_weight", (2 * FFN, D)),
    "prepare_minimax_h3_fc2_weight_fp8": ("fc2_weight", (D, FFN)),
    "quantize_minimax_h3_qkv_weight_nvfp4": ("qkv_weight", (QKV, D)),
    "quantize_minimax_h3_o_weight_nvfp4": ("o_weight", (D, O_IN)),
}.items():
    OPS[_name] = Op(
        getattr(h3cupy, _name),
        lambda f, m, _p=_param, _s=_shape, **kw: {_p: f(_s, "bf16")},
        _param,
        "weights._device_index (an upload)" if "fc1" in _name else _ALLOC,
    )


def _call(op: str, args: dict) -> None:
    OPS[op].fn(**args)


def _reaches_device(op: str, args: dict) -> str:
    with pytest.raises(ReachedDevice) as info:
        _call(op, args)
    return str(info.value)


# ---------------------------------------------------------------------------------------------
# Good calls pass every check
# ---------------------------------------------------------------------------------------------

#: the variants a valid call is tried in (every other entry point: one, on each of its targets)
_VARIANTS = {
    "bf16_pre_attention": [{"p": p} for p in (1, 2, 4, 8)],
    "fp8_pre_attention": [{"out_mode": mode} for mode in ("bf16", "e4m3", "nvfp4")],
    "nvfp4_pre_attention": [{"out_mode": mode} for mode in ("bf16", "e4m3", "nvfp4")],
}
_VALID = [
    (op, kw, target) for op in OPS for kw in _VARIANTS.get(op, [{}]) for target in OPS[op].targets
]


@pytest.mark.parametrize("index", ("int32", "int64"))
@pytest.mark.parametrize("m", (1, 129, 4824))
@pytest.mark.parametrize(
    "op, kw, target",
    _VALID,
    ids=[f"{o}-{'-'.join(map(str, k.values()))}-{t}" for o, k, t in _VALID],
)
def test_valid_call_passes_every_check(op, kw, m, index, target, device_stub):
    """Every operand, output and workspace supplied with the documented shape, dtype and layout
    (int32 and int64 indices): the call gets to its first kernel, having allocated nothing."""
    device_stub["target"] = target
    where = _reaches_device(op, OPS[op].valid(Fakes(), m, index=index, **kw))
    assert OPS[op].reaches in (None, where), where


@pytest.mark.parametrize(
    "op", ("bf16_pre_attention", "fp8_pre_attention", "nvfp4_pre_attention", "mlp_fp8")
)
def test_table_views_are_accepted(op, device_stub):
    """The AdaLN tables as column chunks of a [rows, 6 * 5376] modulation projection (row
    stride 6 * 5376): accepted (SPEC: strided table views)."""
    where = _reaches_device(op, OPS[op].valid(Fakes(), 129, table_stride=6 * D))
    assert where == "jit.get_kernel", where


# ---------------------------------------------------------------------------------------------
# Each operand refused in each way it can be wrong
# ---------------------------------------------------------------------------------------------

#: operands that may be row-strided views (SPEC: the AdaLN tables and the gate table are column
#: chunks of a modulation projection)
STRIDED_OK = {"adaln_scale", "adaln_shift", "gate"}
#: index vectors and the engine's row scales need only their element's alignment (read one
#: element per row; its column scales go in pairs: 8 bytes)
ELEMENT_ALIGNED = {"adaln_index", "rope_positions", "gate_index", "row_scale"}
#: the 128x4-swizzled weight scales: any contiguous uint8 array of the right size (the layout is
#: not a shape), as quantize_minimax_h3_*_weight_nvfp4 returns them
SCALE_BYTES = {"qkv_weight_sf", "o_weight_sf", "b_sf"}


def _accepted(name: str, t: Tensor, how: str) -> bool:
    """Whether the mutation ``how`` leaves ``name`` valid (so the call must pass its checks)."""
    if how == "offset" and (name in ELEMENT_ALIGNED or t.size == 1):
        return True  # one element in: still element-aligned (and one-element scalars are read
        # as one fp32 word)
    if how == "strided" and t.size == 1:
        return True  # a stride means nothing for one element
    if how == "shape" and name == "workspace_flags":
        return True  # at least minimax_h3_*_flags(M) words: longer is fine
    if how == "rank" and t.size == 1:
        return True  # a device scalar: any one-element shape (SPEC §4: one-element arrays)
    return how == "rank" and name in SCALE_BYTES


def _mutated(t: Tensor, how: str, f: Fakes):
    """``t`` made wrong in one way."""
    if how == "none":
        return None
    if how == "host":
        return np.zeros(t.shape, np.uint8)
    if how == "dtype":
        return f(t.shape, "float16")
    if how == "shape":
        return f((*t.shape[:-1], t.shape[-1] + 1), t.fmt)
    if how == "rank":
        return f((1, *t.shape), t.fmt)
    if how == "strided":  # every row (or element) twice as far apart
        if len(t.shape) == 1:
            return f(t.shape, t.fmt, strides=(2,))
        st = list(t.strides)
        st[-2] = 2 * st[-2]
        for i in range(len(st) - 3, -1, -1):
            st[i] = st[i + 1] * t.shape[i + 1]
        return f(t.shape, t.fmt, strides=tuple(st))
    if how == "offset":  # a view starting one element in
        return f(t.shape, t.fmt, strides=t.strides, offset=t.itemsize)
    if how == "device":
        return f(t.shape, t.fmt, strides=t.strides, device=1)
    raise AssertionError(how)


_HOW = ("none", "host", "dtype", "shape", "rank", "strided", "offset", "device")
_MODES = {"fp8_pre_attention": ("bf16", "e4m3", "nvfp4"), "nvfp4_pre_attention": ("bf16", "nvfp4")}


def _cases():
    for op in OPS:
        for mode in _MODES.get(op, (None,)):
            kw = {"out_mode": mode} if mode else {}
            args = OPS[op].valid(Fakes(), 129, **kw)
            params = inspect.signature(OPS[op].fn).parameters
            for name, value in args.items():
                if not isinstance(value, Tensor):
                    continue
                for how in _HOW:
                    if how == "none" and params[name].default is not inspect.Parameter.empty:
                        continue  # optional: None is the documented default
                    if how == "device" and name == OPS[op].first:
                        continue
                    if how == "strided" and name in STRIDED_OK:
                        continue
                    yield pytest.param(
                        op, kw, name, how, id=f"{op}{'-' + mode if mode else ''}-{name}-{how}"
                    )


@pytest.mark.parametrize("op, kw, name, how", list(_cases()))
def test_bad_operand_is_refused(op, kw, name, how, device_stub):
    """One operand wrong (missing, on the host, another dtype, another shape or rank, strided,
    misaligned, on another device), everything else valid: refused before any device work,
    by a TypeError (what the operand is) or ValueError (its shape, layout or place) whose
    message starts with the operand's name and says what was expected and what came."""
    f = Fakes()
    args = OPS[op].valid(f, 129, **kw)
    good = args[name]
    args[name] = _mutated(good, how, f)
    if _accepted(name, good, how):
        assert OPS[op].reaches in (None, _reaches_device(op, args))
        return
    # a required device scalar left out is a ValueError ("required"), as the per-mode scalars are
    kind = TypeError if how in ("none", "host", "dtype") else ValueError
    if how == "none" and name == "act_global_scale":
        kind = ValueError
    with pytest.raises(kind) as info:
        _call(op, args)
    msg = str(info.value)
    assert re.match(rf"{name}: (expected|required)", msg), msg
    assert "got" in msg, msg


# ---------------------------------------------------------------------------------------------
# Scalars, modes and the operands' agreement with each other
# ---------------------------------------------------------------------------------------------


def _table(f: Fakes, rows: int, *, stride: int = D, col: int = 1, width: int = D) -> Tensor:
    return f((rows, width), "bf16", strides=(stride, col))


# (op, valid-call keywords, {argument: bad value or a function of the Fakes}, error, message)
_BAD = [
    *[
        (op, {}, {"eps": v}, ValueError, r"eps: expected a positive finite float .*, got")
        for op in ("bf16_pre_attention", "fp8_pre_attention", "nvfp4_pre_attention", "mlp_fp8")
        # 1e-50 is 0 and 1e39 is inf in fp32, the kernels' eps
        for v in (0.0, -1e-5, float("nan"), float("inf"), 1e-50, 1e39)
    ],
    ("mlp_fp8", {}, {"eps": "1e-5x"}, TypeError, r"eps: expected a float, got str"),
    ("bf16_pre_attention", {}, {"qk_eps": 0.0}, ValueError, r"qk_eps: expected a positive finite"),
    *[
        (
            "bf16_pre_attention",
            {},
            {"ulysses_degree": v},
            ValueError,
            r"ulysses_degree: expected one of 1, 2, 4, 8, got",
        )
        for v in (0, 3, 16, True, 2.0, "2")
    ],
    *[
        (
            op,
            {},
            {"out_mode": v},
            ValueError,
            r"out_mode: expected one of 'bf16', 'e4m3', 'nvfp4', got",
        )
        for op in ("fp8_pre_attention", "nvfp4_pre_attention")
        for v in ("fp16", None, "E4M3")
    ],
    *[
        (
            "mlp_fp8",
            {},
            {"fp8_mma_form": v},
            ValueError,
            r"fp8_mma_form: expected one of -1, 0, 2, got",
        )
        for v in (1, 3, True, 2.0)
    ],
    # the per-kind scalars each out_mode needs, and host values that cannot be scales
    (
        "fp8_pre_attention",
        {"out_mode": "e4m3"},
        {"k_descale": None},
        ValueError,
        r"k_descale: required when out_mode='e4m3'",
    ),
    (
        "nvfp4_pre_attention",
        {"out_mode": "nvfp4"},
        {"v_global_scale": None},
        ValueError,
        r"v_global_scale: required when out_mode='nvfp4'",
    ),
    *[
        (
            "fp8_pre_attention",
            {"out_mode": "e4m3"},
            {"q_descale": v},
            ValueError,
            r"q_descale: expected a positive finite scale .*, got",
        )
        for v in (0.0, -1.0, float("nan"), float("inf"), 1e39, 1e-46)
    ],
    (
        "nvfp4_pre_attention",
        {},
        {"alpha": -2.0},
        ValueError,
        r"alpha: expected a positive finite scale .*, got",
    ),
    (
        "nvfp4_out_proj",
        {},
        {"o_weight_global_scale": 0.0},
        ValueError,
        r"o_weight_global_scale: expected a positive finite scale .*, got",
    ),
    *[
        (
            "fp4_quantize",
            {},
            {"global_scale": v},
            ValueError,
            "global_scale: expected a positive finite scale .*, got",
        )
        for v in (0.0, -336.0, float("nan"), float("inf"), 3.5e38)
    ],
    *[
        (
            "nvfp4_global_scale_from_amax",
            {},
            {"amax": v},
            ValueError,
            "amax: expected a finite float >= 0 .*, got",
        )
        for v in (-1.0, float("nan"), float("inf"), 1e39)
    ],
    (
        "nvfp4_global_scale_from_amax",
        {},
        {"amax": True},
        TypeError,
        "amax: expected a CUDA device array",
    ),
    (
        "fp4_quantize",
        {},
        {"a": lambda f: f((129, D - 8), "bf16")},
        ValueError,
        r"a: expected shape \[M, K\] with M >= 1 and K a multiple of 16, got \[129, 5368\]",
    ),
    (
        "qkv_rows_checkpoint_to_engine",
        {},
        {"w": lambda f: f((QKV, 3), "bf16")},
        ValueError,
        "w: expected rows of a multiple of 4 bytes, got 6",
    ),
    # M from the activation: at least one row
    (
        "bf16_pre_attention",
        {},
        {"x": lambda f: f((0, D), "bf16")},
        ValueError,
        r"x: expected 1 <= M < 2\^31 rows, got M = 0",
    ),
    (
        "fp8_out_proj",
        {},
        {"attn_out": lambda f: f((0, O_IN), "bf16")},
        ValueError,
        r"attn_out: expected",
    ),
    # the AdaLN tables: rows >= 1, unit column stride, a row stride of whole 16-byte words, and
    # the shift laid out as the scale
    (
        "mlp_fp8",
        {},
        {"adaln_scale": lambda f: _table(f, 0)},
        ValueError,
        r"adaln_scale: expected shape \[rows, 5376\] with rows >= 1, got \[0, 5376\]",
    ),
    (
        "mlp_fp8",
        {},
        {"adaln_scale": lambda f: _table(f, 9, stride=D + 4)},
        ValueError,
        r"adaln_scale: expected a row stride that is a multiple of 8",
    ),
    (
        "mlp_fp8",
        {},
        {"adaln_scale": lambda f: _table(f, 9, stride=2 * D, col=2)},
        ValueError,
        r"adaln_scale: expected unit column stride, got stride\(1\) = 2",
    ),
    (
        "bf16_pre_attention",
        {},
        {"adaln_shift": lambda f: _table(f, 9, stride=6 * D)},
        ValueError,
        r"adaln_shift: expected the same rows and row stride as adaln_scale \(9, 5376\), got "
        r"\(9, 32256\)",
    ),
    (
        "fp8_pre_attention",
        {},
        {"adaln_shift": lambda f: _table(f, 8)},
        ValueError,
        r"adaln_shift: expected the same rows and row stride as adaln_scale",
    ),
    # the gate table has the AdaLN tables' rows (the MLP reads all three with one index)
    (
        "mlp_fp8",
        {},
        {"gate": lambda f: _table(f, 4)},
        ValueError,
        r"gate: expected the AdaLN tables' row count 9, got 4",
    ),
    ("fp8_out_proj", {}, {"gate": lambda f: _table(f, 0)}, ValueError, r"gate: expected"),
    # RoPE: identity positions read cache row i for token i
    (
        "bf16_pre_attention",
        {},
        {"rope_positions": None, "rope_cos_sin": lambda f: f((100, 96), "bf16")},
        ValueError,
        r"rope_cos_sin: identity positions \(rope_positions=None\) need S >= M = 129 cache rows, "
        r"got S = 100",
    ),
    (
        "bf16_pre_attention",
        {},
        {"rope_cos_sin": lambda f: f((0, 96), "bf16")},
        ValueError,
        r"rope_cos_sin: expected S >= 1 cache rows, got 0",
    ),
    # (the W8A8 / W4A4 ops take no positions: row m is token m's)
    (
        "fp8_pre_attention",
        {},
        {"rope_cos_sin": lambda f: f((100, 96), "bf16")},
        ValueError,
        r"rope_cos_sin: expected at least M = 129 rows \(row m is token m's\), got 100",
    ),
    # the flags: 1-D (their length is checked against the launch plan, which needs the kernel's
    # occupancy on a GPU: the GPU suite's test_mlp_errors / test_fp8_out_proj_errors)
    (
        "mlp_fp8",
        {},
        {"workspace_flags": lambda f: f((64, 64), "int32")},
        ValueError,
        r"workspace_flags: expected a 1-D int32 array, got shape \[64, 64\]",
    ),
    # ... and at least one word per 128 rows on every back end (M = 129: two)
    *[
        (
            op,
            {},
            {"workspace_flags": lambda f: f((1,), "int32")},
            ValueError,
            rf"workspace_flags: expected at least 2 int32 elements for M = 129 \(one per 128 "
            rf"rows\), got 1; size it with {helper}\(M\)",
        )
        for op, helper in (
            ("mlp_fp8", "minimax_h3_mlp_fc2_flags_sm120"),
            ("fp8_out_proj", "minimax_h3_fp8_out_proj_flags"),
        )
    ],
]


@pytest.mark.parametrize(
    "op, kw, bad, kind, pattern",
    _BAD,
    ids=[f"{c[0]}-{'-'.join(c[2])}-{i}" for i, c in enumerate(_BAD)],
)
def test_bad_value_is_refused(op, kw, bad, kind, pattern, device_stub):
    """A scalar, a mode or an operand's agreement with the others wrong: refused before any
    device work, naming the argument."""
    f = Fakes()
    args = OPS[op].valid(f, 129, **kw)
    for name, value in bad.items():
        args[name] = value(f) if callable(value) else value
    with pytest.raises(kind, match=pattern):
        _call(op, args)


@pytest.mark.parametrize("target", ("sm_90a", "sm_120a"))
@pytest.mark.parametrize("op", ("fp8_out_proj", "mlp_fp8"))
def test_short_flags_are_refused_on_every_back_end(op, target, device_stub):
    """``workspace_flags`` shorter than ceil(M / 128) words: refused on the wgmma back end and on
    the mma.sync one (which uses no flags but documents the same length), before any device
    work."""
    device_stub["target"] = target
    f = Fakes()
    args = OPS[op].valid(f, 4824)
    args["workspace_flags"] = f((37,), "int32")  # ceil(4824 / 128) = 38
    with pytest.raises(ValueError, match=r"workspace_flags: expected at least 38 int32 elements"):
        _call(op, args)


_SCALAR_OPS = [
    ("fp8_pre_attention", {"out_mode": "e4m3"}),
    ("fp8_pre_attention", {"out_mode": "nvfp4"}),
    ("nvfp4_pre_attention", {"out_mode": "nvfp4"}),
    ("nvfp4_out_proj", {}),
    ("fp4_quantize", {}),
    ("nvfp4_global_scale_from_amax", {}),
]


@pytest.mark.parametrize("shape", ((), (1, 1), (1, 1, 1)))
@pytest.mark.parametrize("op, kw", _SCALAR_OPS, ids=[f"{o}-{k}" for o, k in _SCALAR_OPS])
def test_device_scalars_of_any_one_element_shape(op, kw, shape, device_stub):
    """SPEC §4: scalars may be one-element device arrays; a 0-d or [1, 1] fp32 array is read as
    the same one word as an fp32 [1], so every device scalar of the call is accepted in it."""
    f = Fakes()
    args = OPS[op].valid(f, 129, **kw)
    names = [
        n for n, v in args.items() if isinstance(v, Tensor) and v.size == 1 and v.fmt == "float32"
    ]
    assert names, "the valid call has no device scalar"
    for n in names:
        args[n] = f(shape, "float32")
    for target in OPS[op].targets:
        device_stub["target"] = target
        assert OPS[op].reaches in (None, _reaches_device(op, args))


def test_strided_gate_is_accepted(device_stub):
    """The out_proj's and the MLP's gate as a column chunk of the modulation projection."""
    for op in ("fp8_out_proj", "nvfp4_out_proj", "mlp_fp8"):
        f = Fakes()
        args = OPS[op].valid(f, 129)
        args["gate"] = _table(f, 9, stride=6 * D)
        assert _reaches_device(op, args) == "jit.get_kernel", op


@pytest.mark.parametrize(
    "helper", (h3cupy.minimax_h3_fp8_out_proj_flags, h3cupy.minimax_h3_mlp_fc2_flags_sm120)
)
def test_flags_helpers(helper):
    """The flags' length: refused for M < 1; at least one ready counter per 128-row tile (on a
    GPU, the launch plan's words too; without one, just those)."""
    for m in (0, -5):
        with pytest.raises(ValueError, match=rf"m: expected M >= 1, got {m}"):
            helper(m)
    for m in (1, 129, 4824):
        assert helper(m) >= -(-m // 128)


# ---------------------------------------------------------------------------------------------
# Overlaps: what a call writes must not share memory with anything else it touches
# ---------------------------------------------------------------------------------------------

#: outputs and workspaces (written by the kernels); every other tensor operand is only read
WRITTEN = {
    "out",
    "workspace",
    "workspace_flags",
    *("q", "k", "v", "q_sf", "k_sf", "v_sf"),
    *("act_q", "act_scale", "act_sf", "workspace_a", "workspace_w"),
    *(f"workspace_{n}" for n in ("a_q", "a_scale", "y", "y_q", "y_scale")),
}
#: the documented aliases (SPEC.md §5, §6): out may be that operand itself
ALIASES = {
    "fp8_out_proj": {("out", "residual")},
    "nvfp4_out_proj": {("out", "residual")},
    "mlp_fp8": {("out", "residual"), ("out", "x")},
}


def _overlap_cases():
    for op in OPS:
        for mode in _MODES.get(op, (None,)):
            kw = {"out_mode": mode} if mode else {}
            args = OPS[op].valid(Fakes(), 129, **kw)
            tensors = [n for n, v in args.items() if isinstance(v, Tensor)]
            for w in (n for n in tensors if n in WRITTEN):
                for other in tensors:
                    if other != w:
                        yield pytest.param(
                            op, kw, w, other, id=f"{op}{'-' + mode if mode else ''}-{w}-{other}"
                        )


def _at(t: Tensor, ptr: int) -> Tensor:
    """``t``'s description moved to address ``ptr``."""
    u = Tensor(None, t.fmt, False, t.device)
    u.shape, u._strides, u.itemsize, u.ptr, u._raw = t.shape, t.strides, t.itemsize, ptr, t._raw
    return u


@pytest.mark.parametrize("op, kw, written, other", list(_overlap_cases()))
def test_partial_overlap_is_refused(op, kw, written, other, device_stub):
    """An output or workspace placed 256 bytes before another operand (so that it covers that
    operand's first bytes; still 16-byte aligned, its own shape and format valid): refused
    before any device work, naming both. Documented aliases are allowed only as the same view,
    so a partial overlap of those is refused too. (Fakes leaves 256 free bytes after every
    operand, so the moved one meets the other before anything else.)"""
    args = OPS[op].valid(Fakes(), 129, **kw)
    args[written] = _at(args[written], args[other].ptr - 256)
    with pytest.raises(ValueError) as info:
        _call(op, args)
    msg = str(info.value)
    names = f"({re.escape(written)}|{re.escape(other)})"
    assert re.match(rf"{names}: expected memory disjoint from {names}", msg), msg
    assert written in msg and other in msg and "got bytes" in msg, msg


@pytest.mark.parametrize("op, pair", [(op, p) for op, ps in ALIASES.items() for p in sorted(ps)])
def test_documented_alias_is_accepted(op, pair, device_stub):
    """``out`` given as ``residual`` itself (and, for the MLP, as ``x``): accepted."""
    args = OPS[op].valid(Fakes(), 129)
    args[pair[0]] = args[pair[1]]
    assert _reaches_device(op, args) == "jit.get_kernel"


def test_undocumented_alias_is_refused(device_stub):
    """The same buffer as two things the op writes, or as something written and something
    read that SPEC does not pair: refused."""
    cases = [
        ("fp8_out_proj", "out", "attn_out"),  # shapes differ: only a prefix would be shared
        ("mlp_fp8", "workspace_y", "workspace_y"),
        ("fp8_pre_attention", "k", "q"),
        ("bf16_pre_attention", "workspace", "x"),
        ("gemm_wgmma", "out", "a"),
    ]
    for op, written, other in cases:
        f = Fakes()
        args = OPS[op].valid(f, 129)
        if written == other:  # two workspaces on one buffer: workspace_y_q over workspace_y
            args["workspace_y_q"] = _at(args["workspace_y_q"], args["workspace_y"].ptr)
        else:
            args[written] = _at(args[written], args[other].ptr)
        with pytest.raises(ValueError, match="expected memory disjoint from"):
            _call(op, args)


def test_read_only_overlaps_are_accepted(device_stub):
    """Operands that are only read may share memory: the MLP's x as its residual, the gate as
    the AdaLN scale table, the out_proj's gate as a one-row view of its residual."""
    args = OPS["mlp_fp8"].valid(Fakes(), 129)
    args["residual"] = args["x"]
    args["gate"] = args["adaln_scale"]
    assert _reaches_device("mlp_fp8", args) == "jit.get_kernel"
    args = OPS["fp8_out_proj"].valid(Fakes(), 129)
    args["gate"] = _at(args["gate"], args["residual"].ptr)
    assert _reaches_device("fp8_out_proj", args) == "jit.get_kernel"


def test_output_in_a_table_views_gap(device_stub):
    """A row-strided table view (a column chunk of the modulation projection) leaves gaps
    between its rows: an output that lies wholly in a gap is accepted (the check is exact for
    such views), one that reaches into a row is refused."""
    f = Fakes()
    args = OPS["fp8_out_proj"].valid(f, 1)
    gate = _table(f, 9, stride=6 * D)
    args["gate"] = gate
    args["out"] = _at(args["out"], gate.ptr + 2 * D)  # row 0's gap: columns D .. 2D of row 0
    assert _reaches_device("fp8_out_proj", args) == "jit.get_kernel"
    args["out"] = _at(args["out"], gate.ptr + 2 * D - 16)  # 8 elements of row 0
    with pytest.raises(ValueError, match="out: expected memory disjoint from gate"):
        _call("fp8_out_proj", args)
    args["out"] = _at(args["out"], gate.ptr + 6 * D * 2 - 16)  # into row 1
    with pytest.raises(ValueError, match="out: expected memory disjoint from gate"):
        _call("fp8_out_proj", args)


def test_check_disjoint_layouts():
    """checks.check_disjoint on its own: empty operands meet nothing, negative strides count
    their whole span, an alias must be the same view, and None entries are skipped."""
    from h3cupy.core import checks

    f = Fakes()
    a = f((64, 64), "bf16")
    empty = _at(f((0, 64), "bf16"), a.ptr)
    checks.check_disjoint([("out", empty)], [("a", a)])
    checks.check_disjoint([("out", None)], [("a", a), ("b", None)])
    rev = f((64,), "float32")
    back = Tensor(None, "float32", False, 0)  # rev read backwards: ptr at its last element
    back.shape, back._strides, back.itemsize, back.ptr = (64,), (-1,), 4, rev.ptr + 63 * 4
    tail = _at(f((1,), "float32"), rev.ptr)  # rev's first element
    with pytest.raises(ValueError, match="tail: expected memory disjoint from back"):
        checks.check_disjoint([("tail", tail)], [("back", back)])
    half = Tensor(None, "bf16", False, 0)  # a's first 32 rows: the same address, another view
    half.shape, half._strides, half.itemsize, half.ptr = (32, 64), (64, 1), 2, a.ptr
    with pytest.raises(ValueError, match=r"out: expected memory disjoint from a \(or a itself"):
        checks.check_disjoint([("out", half)], [("a", a)], [("out", "a")])
    checks.check_disjoint([("out", a)], [("a", a)], [("out", "a")])


# ---------------------------------------------------------------------------------------------
# The operands' device is made current for the call
# ---------------------------------------------------------------------------------------------


class _FakesOn1(Fakes):
    """Fakes on CUDA device 1 (the caller's current device stays 0)."""

    def __call__(self, shape, fmt, *, strides=None, offset=0, device=1) -> Tensor:
        return super().__call__(shape, fmt, strides=strides, offset=offset, device=device)


@pytest.mark.parametrize("op", list(OPS))
def test_call_runs_on_the_operands_device(op, device_stub, monkeypatch):
    """Every operand on device 1 while device 0 is current: the entry point enters device 1's
    scope (arch.on_operand_device) before anything else, and its checks pass there."""
    scopes = []

    def scope(dev):
        scopes.append(dev)
        return contextlib.nullcontext()

    monkeypatch.setattr(arch, "device_scope", scope)
    args = OPS[op].valid(_FakesOn1(), 129)
    _reaches_device(op, args)
    assert scopes[:1] == [1], scopes


def test_operand_device():
    """arch.operand_device: torch CUDA tensors, CuPy arrays and interop.Tensor give their device;
    host arrays, CPU tensors and scalars give None (the checks refuse them)."""
    from types import SimpleNamespace as NS

    assert arch.operand_device(Fakes()((4,), "float32", device=3)) == 3
    assert arch.operand_device(NS(device=NS(type="cuda", index=2))) == 2  # torch, cuda:2
    assert arch.operand_device(NS(device=NS(type="cpu", index=None))) is None  # torch, CPU
    assert arch.operand_device(NS(device=NS(id=1))) == 1  # CuPy
    # DLPack producers without a .device attribute: (kDLCUDA, 2) and a host one (kDLCPU)
    assert arch.operand_device(NS(__dlpack_device__=lambda: (2, 2))) == 2
    assert arch.operand_device(NS(__dlpack_device__=lambda: (1, 0))) is None
    assert arch.operand_device(np.zeros(3)) is None  # NumPy 2: device "cpu"
    assert arch.operand_device(1.0) is None


def test_untyped_cuda_array_interface_is_refused():
    """The interface's typestr has no bfloat16 or float8 code: such an array says ``<V2`` (raw
    bytes) and CuPy would import it as untyped bytes. Refused before any device work, naming the
    argument, what came and the ways that carry the dtype."""
    from types import SimpleNamespace as NS

    cai = {"shape": (4, 8), "typestr": "<V2", "data": (0x7F0000, False), "version": 3}
    with pytest.raises(TypeError) as e:
        interop.as_tensor(NS(__cuda_array_interface__=cai), "x")
    msg = str(e.value)
    assert msg.startswith("x:") and "'<V2'" in msg and "bfloat16" in msg and "__dlpack__" in msg


def test_foreign_import_refusals_are_readable(monkeypatch):
    """A DLPack object CuPy cannot import (an older CuPy and a bfloat16 producer, say) and an
    untyped interface on an object that also speaks DLPack (DLPack is tried, as it names
    bfloat16): CuPy's refusal comes back as a TypeError naming the argument and the route."""
    from types import SimpleNamespace as NS

    import cupy

    tried = []

    def refuse(x, *a, **k):
        tried.append(x)
        raise NotImplementedError("CuPy does not support bfloat16 yet")

    monkeypatch.setattr(cupy, "from_dlpack", refuse)
    dl = NS(__dlpack__=lambda **k: None, __dlpack_device__=lambda: (2, 0))
    with pytest.raises(TypeError, match=r"^w: .*through DLPack.*does not support bfloat16"):
        interop.as_tensor(dl, "w")
    cai = {"shape": (4,), "typestr": "<V2", "data": (0x7F0000, False), "version": 3}
    both = NS(__cuda_array_interface__=cai, __dlpack__=dl.__dlpack__)
    with pytest.raises(TypeError, match=r"^w: .*through DLPack"):
        interop.as_tensor(both, "w")
    assert tried == [dl, both]


def test_operand_device_cuda_array_interface(monkeypatch):
    """A bare ``__cuda_array_interface__`` object names no device: the pointer's owner is asked
    (cudaPointerGetAttributes, stubbed here: this machine may have no driver); a null pointer
    (an empty array) gives None."""
    from types import SimpleNamespace as NS

    import cupy

    asked = []

    def attrs(ptr):
        asked.append(ptr)
        return NS(device=1)

    monkeypatch.setattr(cupy.cuda.runtime, "pointerGetAttributes", attrs)
    cai = {"shape": (4,), "typestr": "<f4", "data": (0x7F0000, False), "version": 3}
    assert arch.operand_device(NS(__cuda_array_interface__=cai)) == 1
    assert asked == [0x7F0000]
    empty = dict(cai, shape=(0,), data=(0, False))
    assert arch.operand_device(NS(__cuda_array_interface__=empty)) is None
    assert asked == [0x7F0000]
