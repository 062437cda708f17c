# ruff: noqa: UP045
"""h3cupy's operators as PyTorch custom ops, so that a model compiled with ``torch.compile``
keeps them in its graph (no graph break), ``mode="reduce-overhead"`` (CUDA graphs) included.

    import h3cupy.torch_ops  # registers torch.ops.h3cupy.*; needs torch >= 2.4

    out = torch.ops.h3cupy.bf16_pre_attention(x, ..., rope_cos_sin, ulysses_degree=8)

Each op is the functional form of the h3cupy function of the same name (``minimax_h3_`` dropped):
it takes the operands and scalars, allocates its outputs and workspaces with torch's caching
allocator, and returns the outputs; the math, the checks and the errors are the function's.
Inference only: there is no autograd formula.
What the functional form leaves out, and how to get it:
- caller-owned outputs and workspaces (``out=``, ``act_q=``, ``workspace_*=``): call the h3cupy
  function itself, as in eager code;
- device scalars (descales, global scales, ``alpha``) are one-element fp32 tensors here, never
  Python floats, so a compiled graph does not specialize on their values;
- ``minimax_h3_bf16_pre_attention``'s ``out`` is returned, not passed.

Each op also has a fake (meta) implementation giving its outputs' shapes and dtypes, which is
all that ``torch.compile`` traces; the kernels run when the compiled graph runs.
"""

import inspect
from typing import Optional  # (typing.Optional: read by torch.library's schema inference since 2.4)

import torch

from .ops.mlp import minimax_h3_mlp_fp8_sm120
from .ops.out_proj import minimax_h3_fp8_out_proj, minimax_h3_nvfp4_out_proj
from .ops.pre_attention import (
    HEAD_DIM,
    HEADS,
    minimax_h3_bf16_pre_attention,
    minimax_h3_fp8_pre_attention,
    minimax_h3_nvfp4_pre_attention,
)
from .ops.prologue import D


def _empty(like: torch.Tensor, shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
    return torch.empty(shape, dtype=dtype, device=like.device)


# Each op's implementation below declares the function's own parameters (torch reads the schema
# from the annotations; tests/test_torch_ops.py checks the names against the function's) and
# passes them on by name with ``**locals()``, taken before any other local exists.


def _register(name: str, impl, outputs):
    """Register ``impl`` as ``torch.ops.h3cupy.<name>`` (schema from its annotations) with a fake
    implementation that returns ``outputs(args)``: empty tensors of the outputs' shapes and
    dtypes, from the call's arguments bound to ``impl``'s signature by name (the dispatcher
    passes them positionally)."""
    sig = inspect.signature(impl)
    op = torch.library.custom_op(f"h3cupy::{name}", impl, mutates_args=())

    def fake(*args, **kwargs):
        bound = sig.bind(*args, **kwargs)
        bound.apply_defaults()
        return outputs(bound.arguments)

    op.register_fake(fake)
    return op


# ---- BF16 pre-attention (SPEC §3) ------------------------------------------------------------


def _bf16_pre_attention(
    x: torch.Tensor,
    x_norm_weight: torch.Tensor,
    adaln_scale: torch.Tensor,
    adaln_shift: torch.Tensor,
    adaln_index: torch.Tensor,
    qkv_weight: torch.Tensor,
    q_norm_weight: torch.Tensor,
    k_norm_weight: torch.Tensor,
    rope_cos_sin: torch.Tensor,
    ulysses_degree: int,
    eps: float = 1e-5,
    qk_eps: Optional[float] = None,
    rope_positions: Optional[torch.Tensor] = None,
) -> torch.Tensor:
    """:func:`h3cupy.minimax_h3_bf16_pre_attention`; returns ``out``, bf16
    ``[P, M, 56 // P, 3, 128]``."""
    args = dict(locals(), ulysses_degree=int(ulysses_degree))  # the parameters, by name
    return minimax_h3_bf16_pre_attention(**args, out=_pack_fake(args))


# ---- FP8 and NVFP4 pre-attention (SPEC §4) -----------------------------------------------------


def _qkv_fake(x: torch.Tensor, out_mode: str) -> list[torch.Tensor]:
    m = x.shape[0]
    if out_mode == "nvfp4":
        codes = [_empty(x, (m, HEADS, HEAD_DIM // 2), torch.uint8) for _ in range(3)]
        return codes + [_empty(x, (m, HEADS, HEAD_DIM // 16), torch.uint8) for _ in range(3)]
    dtype = torch.float8_e4m3fn if out_mode == "e4m3" else torch.bfloat16
    return [_empty(x, (m, HEADS, HEAD_DIM), dtype) for _ in range(3)]


def _qkv_list(res, out_mode: str) -> list[torch.Tensor]:
    outs = [res.q, res.k, res.v]
    return outs + [res.q_sf, res.k_sf, res.v_sf] if out_mode == "nvfp4" else outs


def _fp8_pre_attention(
    x: torch.Tensor,
    x_norm_weight: torch.Tensor,
    adaln_scale: torch.Tensor,
    adaln_shift: torch.Tensor,
    adaln_index: torch.Tensor,
    qkv_weight_q: torch.Tensor,
    qkv_weight_scale: torch.Tensor,
    q_norm_weight: torch.Tensor,
    k_norm_weight: torch.Tensor,
    rope_cos_sin: torch.Tensor,
    eps: float = 1e-5,
    out_mode: str = "bf16",
    q_descale: Optional[torch.Tensor] = None,
    k_descale: Optional[torch.Tensor] = None,
    v_descale: Optional[torch.Tensor] = None,
    q_global_scale: Optional[torch.Tensor] = None,
    k_global_scale: Optional[torch.Tensor] = None,
    v_global_scale: Optional[torch.Tensor] = None,
) -> list[torch.Tensor]:
    """:func:`h3cupy.minimax_h3_fp8_pre_attention`; returns ``[q, k, v]`` (bf16 or e4m3
    ``[M, 56, 128]``), or ``[q, k, v, q_sf, k_sf, v_sf]`` for ``"nvfp4"`` (uint8 ``[M, 56, 64]``
    codes and ``[M, 56, 8]`` linear ue4m3 scales)."""
    return _qkv_list(minimax_h3_fp8_pre_attention(**locals()), out_mode)


def _nvfp4_pre_attention(
    x: torch.Tensor,
    x_norm_weight: torch.Tensor,
    adaln_scale: torch.Tensor,
    adaln_shift: torch.Tensor,
    adaln_index: torch.Tensor,
    qkv_weight_q: torch.Tensor,
    qkv_weight_sf: torch.Tensor,
    qkv_weight_global_scale: torch.Tensor,
    act_global_scale: torch.Tensor,
    q_norm_weight: torch.Tensor,
    k_norm_weight: torch.Tensor,
    rope_cos_sin: torch.Tensor,
    eps: float = 1e-5,
    out_mode: str = "bf16",
    alpha: Optional[torch.Tensor] = None,
    q_descale: Optional[torch.Tensor] = None,
    k_descale: Optional[torch.Tensor] = None,
    v_descale: Optional[torch.Tensor] = None,
    q_global_scale: Optional[torch.Tensor] = None,
    k_global_scale: Optional[torch.Tensor] = None,
    v_global_scale: Optional[torch.Tensor] = None,
) -> list[torch.Tensor]:
    """:func:`h3cupy.minimax_h3_nvfp4_pre_attention`; returns as :func:`fp8_pre_attention`."""
    return _qkv_list(minimax_h3_nvfp4_pre_attention(**locals()), out_mode)


# ---- out_proj (SPEC §5) and the MLP (SPEC §6) ---------------------------------------------------


def _fp8_out_proj(
    attn_out: torch.Tensor,
    o_weight_q: torch.Tensor,
    o_weight_scale: torch.Tensor,
    gate: torch.Tensor,
    gate_index: torch.Tensor,
    residual: torch.Tensor,
) -> torch.Tensor:
    """:func:`h3cupy.minimax_h3_fp8_out_proj`; returns ``out``, bf16 ``[M, 5376]``."""
    return minimax_h3_fp8_out_proj(**locals())


def _nvfp4_out_proj(
    attn_out: torch.Tensor,
    o_weight_q: torch.Tensor,
    o_weight_sf: torch.Tensor,
    o_weight_global_scale: torch.Tensor,
    act_global_scale: torch.Tensor,
    gate: torch.Tensor,
    gate_index: torch.Tensor,
    residual: torch.Tensor,
) -> torch.Tensor:
    """:func:`h3cupy.minimax_h3_nvfp4_out_proj`; returns ``out``, bf16 ``[M, 5376]``."""
    return minimax_h3_nvfp4_out_proj(**locals())


def _mlp_fp8(
    x: torch.Tensor,
    x_norm_weight: torch.Tensor,
    adaln_scale: torch.Tensor,
    adaln_shift: torch.Tensor,
    adaln_index: torch.Tensor,
    gate: torch.Tensor,
    residual: torch.Tensor,
    fc1_weight_q: torch.Tensor,
    fc1_weight_scale: torch.Tensor,
    fc2_weight_q: torch.Tensor,
    fc2_weight_scale: torch.Tensor,
    eps: float = 1e-5,
    fp8_mma_form: int = -1,
) -> torch.Tensor:
    """:func:`h3cupy.minimax_h3_mlp_fp8_sm120`; returns ``out``, bf16 ``[M, 5376]``."""
    return minimax_h3_mlp_fp8_sm120(**locals())


def _pack_fake(a):
    p = int(a["ulysses_degree"])
    return _empty(a["x"], (p, a["x"].shape[0], HEADS // max(p, 1), 3, HEAD_DIM), torch.bfloat16)


def _rows_fake(name):
    return lambda a: _empty(a[name], (a[name].shape[0], D), torch.bfloat16)


#: the registered ops, by name under ``torch.ops.h3cupy``
OPS = {
    "bf16_pre_attention": _register("bf16_pre_attention", _bf16_pre_attention, _pack_fake),
    "fp8_pre_attention": _register(
        "fp8_pre_attention", _fp8_pre_attention, lambda a: _qkv_fake(a["x"], a["out_mode"])
    ),
    "nvfp4_pre_attention": _register(
        "nvfp4_pre_attention", _nvfp4_pre_attention, lambda a: _qkv_fake(a["x"], a["out_mode"])
    ),
    "fp8_out_proj": _register("fp8_out_proj", _fp8_out_proj, _rows_fake("attn_out")),
    "nvfp4_out_proj": _register("nvfp4_out_proj", _nvfp4_out_proj, _rows_fake("attn_out")),
    "mlp_fp8": _register("mlp_fp8", _mlp_fp8, _rows_fake("x")),
}
