"""NumPy host references of every h3cupy op (SPEC.md §2-§7); importable without a GPU or CuPy.

The names mirror the device ops. Inputs are NumPy arrays (bf16 tensors as ``ml_dtypes.bfloat16`` or
float32 arrays holding bf16 values); bf16 results are float32 arrays holding bf16 values.
"""

from __future__ import annotations

from h3cupy.reference.mlp import MlpOutput, minimax_h3_mlp_fp8_sm120, swiglu
from h3cupy.reference.out_proj import minimax_h3_fp8_out_proj, minimax_h3_nvfp4_out_proj
from h3cupy.reference.pre_attention import (
    PreAttentionOutput,
    minimax_h3_bf16_pre_attention,
    minimax_h3_fp8_pre_attention,
    minimax_h3_nvfp4_pre_attention,
    qkv_epilogue,
)
from h3cupy.reference.prologue import prologue, prologue_fp8, prologue_nvfp4
from h3cupy.reference.weights import (
    fp4_quantize,
    prepare_minimax_h3_fc1_weight_fp8,
    prepare_minimax_h3_fc2_weight_fp8,
    quantize_minimax_h3_o_weight_fp8,
    quantize_minimax_h3_o_weight_nvfp4,
    quantize_minimax_h3_qkv_weight_fp8,
    quantize_minimax_h3_qkv_weight_nvfp4,
)

__all__ = [
    "MlpOutput",
    "PreAttentionOutput",
    "fp4_quantize",
    "minimax_h3_bf16_pre_attention",
    "minimax_h3_fp8_out_proj",
    "minimax_h3_fp8_pre_attention",
    "minimax_h3_mlp_fp8_sm120",
    "minimax_h3_nvfp4_out_proj",
    "minimax_h3_nvfp4_pre_attention",
    "prepare_minimax_h3_fc1_weight_fp8",
    "prepare_minimax_h3_fc2_weight_fp8",
    "prologue",
    "prologue_fp8",
    "prologue_nvfp4",
    "qkv_epilogue",
    "quantize_minimax_h3_o_weight_fp8",
    "quantize_minimax_h3_o_weight_nvfp4",
    "quantize_minimax_h3_qkv_weight_fp8",
    "quantize_minimax_h3_qkv_weight_nvfp4",
    "swiglu",
]
