"""The single-launch out_proj's shared-memory layout on sm_90a (CPU-only).

Its 192-column kernels stage each spare row in a buffer the engine reserves after its barriers
(ProQuantRowsFp8<true>::kSmemBytes in kernels/out_proj.cu). The host mirrors the size
(out_proj.FUSED_ROW_SMEM, passed to gemm.wgmma_smem_bytes); a mirror that falls short makes the
kernel trap at entry (require_dynamic_smem) on the GPU, so the two are compared here, and the
buffer must leave the FP8 ring its four stages within the H200's 232448 bytes.
"""

from __future__ import annotations

import re
from pathlib import Path

from h3cupy.ops import gemm, out_proj

SRC = Path(gemm.__file__).resolve().parents[1] / "cuda_src" / "kernels" / "out_proj.cu"


def _constant(name: str, text: str) -> str:
    m = re.search(rf"static constexpr int {name} = ([^;]+);", text)
    assert m, f"{name} not found in {SRC.name}"
    return m.group(1)


def test_row_buffer_mirror_matches_cpp():
    text = SRC.read_text()
    buf = int(_constant("kRowBufBytes", text))
    assert _constant("kSmemBytes", text) == "kSmemRows ? 32 + kRowBufBytes : 0"
    assert 32 + buf == out_proj.FUSED_ROW_SMEM
    assert buf == 2 * 7168  # one attn_out row of bf16 (K = 7168)


def test_fused_plan_keeps_four_stages():
    # the plan the op launches with, single-launch against two-launch (the same epilogue)
    plain, fused = out_proj.gated_smem_bytes(192, False), out_proj.gated_smem_bytes(192, True)
    assert fused - plain == out_proj.FUSED_ROW_SMEM  # the same ring: no stage given up
    assert fused <= 232448
    assert out_proj.gated_smem_bytes(128, True) == out_proj.gated_smem_bytes(128, False)
