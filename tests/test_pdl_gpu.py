"""GPU: programmatic dependent launch (h3cupy.core.launch.PDL, off by default).

With it on, the ops launch their sm_90a engine kernels with the programmatic-serialization
attribute, so a GEMM may start while the kernel before it (the prologue, a quantization) still
runs; the engine waits (griddepcontrol.wait) before it touches global memory. Here: each op with
it on and with it off passes its reference checks (SPEC §8 bounds, inputs poisoned and graphs
replayed by h3cupy.verify), and on / off, eager / graph replay give the same bits.
"""

from __future__ import annotations

import numpy as np
import pytest

from h3cupy.testing import assert_passed, need_sm90a
from h3cupy.verify import (
    check_mlp_fp8,
    check_out_proj_fp8,
    check_pre_attention_bf16,
    check_pre_attention_fp8,
)

pytestmark = pytest.mark.gpu


def _need_sm90():
    need_sm90a("the programmatic engine launch")


@pytest.mark.parametrize("pdl", (True, False), ids=("pdl", "no_pdl"))
@pytest.mark.parametrize("op", ("bf16_pre_attention", "fp8_pre_attention", "out_proj", "mlp"))
def test_ops_pdl(op, pdl, rng, monkeypatch):
    """launch.PDL on and off: each op's reference checks at M = 4824 (the tail split on; graphs
    for the quantized ops), the out_proj and the MLP in their two-launch forms (a quantization
    kernel right before the GEMM). A GEMM that read its activation before the kernel writing it
    had ended would read the poisoned workspace."""
    from h3cupy.core import launch
    from h3cupy.ops import mlp, out_proj

    _need_sm90()
    monkeypatch.setattr(launch, "PDL", pdl)
    monkeypatch.setattr(out_proj, "FUSED_QUANT", False)
    monkeypatch.setattr(mlp, "FUSED_QUANT", False)
    if op == "bf16_pre_attention":
        results = check_pre_attention_bf16(4824, (8, 1), rng)
    elif op == "fp8_pre_attention":
        results = check_pre_attention_fp8(4824, "bf16", rng, graph=True)
    elif op == "out_proj":
        results = check_out_proj_fp8(4824, rng, index_dtype=np.int64, graph=True)
    else:
        results = check_mlp_fp8(4824, rng, graph=True)
    assert_passed(results)


@pytest.mark.parametrize("m", (129, 4824))
def test_bf16_pre_attention_pdl_bits(m, rng, monkeypatch):
    """The BF16 pre-attention (prologue, then the GEMM launched programmatically): eager with
    launch.PDL off, eager with it on, and a CUDA-graph replay of the programmatic launches give
    the same bits (the output poisoned before each)."""
    import torch

    from h3cupy.core import launch
    from h3cupy.ops.pre_attention import minimax_h3_bf16_pre_attention as op
    from h3cupy.testing import bf16_pre_attention_torch_args

    _need_sm90()
    p = 8
    args, out, ws = bf16_pre_attention_torch_args(m, p, rng)

    def run():
        out.view(torch.uint8).fill_(0xFF)
        op(*args, ulysses_degree=p, out=out, workspace=ws)
        torch.cuda.synchronize()
        return out.clone()

    monkeypatch.setattr(launch, "PDL", False)
    off = run()
    assert not torch.isnan(off.float()).any(), "unwritten output"
    monkeypatch.setattr(launch, "PDL", True)
    on = run()
    assert torch.equal(on.view(torch.int16), off.view(torch.int16)), "PDL on differs from off"
    out.view(torch.uint8).fill_(0xFF)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        op(*args, ulysses_degree=p, out=out, workspace=ws)
    out.view(torch.uint8).fill_(0xFF)
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(out.view(torch.int16), off.view(torch.int16)), "graph replay differs"
