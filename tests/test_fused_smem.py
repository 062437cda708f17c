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

import numpy as np

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


def test_decode_a_plan_keeps_the_ring():
    # The NVFP4 single launch without a' (kDecodeA): a stage's A area is 48 bytes a row (codes
    # and scales) instead of 128, decoded into registers (no bf16 A buffer); the mirror must fit
    # sm_90's opt-in limit and give at least the bf16 form's stages.
    for tile_n in (128, 224, 256):
        plain, dec = gemm.wgmma_smem_bytes(tile_n), gemm.wgmma_smem_bytes(tile_n, decode_a=True)
        assert dec <= 232448, tile_n
        stage_plain, stage_dec = (128 + tile_n) * 128, 128 * 48 + tile_n * 128
        # the ring's stages, from each total (staging, barriers and slack are the same but for
        # the two barrier words per stage)
        stages_plain = (plain - 2 * 16384 - 32 - 1024) // (stage_plain + 16)
        stages_dec = (dec - 2 * 16384 - 32 - 1024) // (stage_dec + 16)
        assert stages_dec >= stages_plain, (tile_n, stages_plain, stages_dec)
        assert stage_dec % 1024 == 0  # 128B-swizzled tiles need 1024-byte aligned stage bases


def test_kperm_columns_is_the_fragment_order():
    # The NVFP4 register-A form (Nvfp4DecodeA::decode_a): thread c = lane % 4 decodes code bytes
    # 8c .. 8c + 7 of a row's k-tile, byte 8c + 2j + h into k-step j's a0 / a1 (h = 0) or a2 / a3
    # (h = 1), whose columns are 16j + 2c (+ 8 for h = 1) and + 1 (the m16n8k16 A layout). So
    # logical column 16j + 8h + 2c + e holds plain column 2 (8c + 2j + h) + e, and w' must too.
    want = np.empty(64, dtype=np.int64)
    for c in range(4):
        for j in range(4):
            for h in range(2):
                for e in range(2):
                    want[16 * j + 8 * h + 2 * c + e] = 2 * (8 * c + 2 * j + h) + e
    got = gemm.kperm_columns(192)
    assert np.array_equal(got, np.concatenate([want, want + 64, want + 128]))
    assert np.array_equal(np.sort(got), np.arange(192))  # a permutation within each k-tile
