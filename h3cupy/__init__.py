"""h3cupy: fused GPU kernels for the MiniMax-H3 diffusion transformer.

CUDA C++ sources (``cuda_src/``) compiled at run time by NVRTC and launched through CuPy on CuPy
arrays or torch tensors. The public names are the operators and helpers of SPEC.md; the NumPy
twins of every one live in :mod:`h3cupy.reference`.
"""

from __future__ import annotations

from .ops.mlp import minimax_h3_mlp_fc2_flags_sm120, minimax_h3_mlp_fp8_sm120
from .ops.out_proj import (
    minimax_h3_fp8_out_proj,
    minimax_h3_fp8_out_proj_flags,
    minimax_h3_nvfp4_out_proj,
)
from .ops.pre_attention import (
    minimax_h3_bf16_pre_attention,
    minimax_h3_fp8_pre_attention,
    minimax_h3_nvfp4_pre_attention,
)
from .weights import (
    fp4_quantize,
    nvfp4_global_scale_from_amax,
    prepare_minimax_h3_fc1_weight_fp8,
    prepare_minimax_h3_fc2_weight_fp8,
    qkv_rows_checkpoint_to_engine,
    quantize_minimax_h3_o_weight_fp8,
    quantize_minimax_h3_o_weight_nvfp4,
    quantize_minimax_h3_qkv_weight_fp8,
    quantize_minimax_h3_qkv_weight_nvfp4,
)

__version__ = "0.1.0"

__all__ = [
    "minimax_h3_bf16_pre_attention",
    "minimax_h3_fp8_out_proj",
    "minimax_h3_fp8_out_proj_flags",
    "minimax_h3_mlp_fc2_flags_sm120",
    "minimax_h3_mlp_fp8_sm120",
    "minimax_h3_nvfp4_out_proj",
    "minimax_h3_nvfp4_pre_attention",
    "minimax_h3_fp8_pre_attention",
    "fp4_quantize",
    "nvfp4_global_scale_from_amax",
    "prepare_minimax_h3_fc1_weight_fp8",
    "prepare_minimax_h3_fc2_weight_fp8",
    "qkv_rows_checkpoint_to_engine",
    "quantize_minimax_h3_o_weight_fp8",
    "quantize_minimax_h3_o_weight_nvfp4",
    "quantize_minimax_h3_qkv_weight_fp8",
    "quantize_minimax_h3_qkv_weight_nvfp4",
]
