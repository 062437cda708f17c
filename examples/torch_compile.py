"""One FP8 MiniMax-H3 block as a single ``torch.compile``'d function, h3cupy's ops inside it:

    python examples/torch_compile.py [M]

    fp8_pre_attention  ->  attention (torch SDPA)  ->  fp8_out_proj  ->  mlp_fp8

``import h3cupy.torch_ops`` registers the operators as ``torch.ops.h3cupy.*``. The block is a
``torch.nn.Module`` whose weights are buffers, compiled with ``fullgraph=True`` (a graph break
would be an error) and ``mode="reduce-overhead"`` (torch records the whole block into a CUDA
graph and replays it). The example prints whether the compiled block's output is bit-identical
to the same block run eagerly (the same kernels), and the time per block in both forms. The
h3cupy functions are checked against the NumPy references in ``examples/h3_block.py`` and the
tests.

Without an sm_90a GPU, ``torch.compile(fullgraph=True)`` traces the block on meta tensors
instead, through the ops' fake implementations (``backend="eager"``: nothing is compiled for a
device), and the example prints the output's shape. Without torch, it says so and stops.
"""

from __future__ import annotations

import sys

import numpy as np

D, HEADS, HD = 5376, 56, 128


def make_block(torch):
    """The block as a ``torch.nn.Module`` class (torch is imported by the caller)."""
    import torch.nn.functional as F

    class FP8Block(torch.nn.Module):
        """One block. The weights, the norms' weights and the RoPE cache are buffers: under
        ``mode="reduce-overhead"`` torch treats a module's buffers as fixed addresses, so a replay
        copies only the per-call inputs (x, modulation, index) into its graph.

        ``forward(x, modulation, index)``: ``x`` bf16 ``[M, 5376]``; ``modulation`` bf16
        ``[rows, 6 * 5376]`` (the chunks shift_msa, scale_msa, gate_msa, shift_mlp, scale_mlp and
        gate_mlp, taken as column views); ``index`` int32 / int64 ``[M]``. Returns bf16
        ``[M, 5376]``."""

        def __init__(self, **buffers):
            super().__init__()
            for name, t in buffers.items():
                self.register_buffer(name, t)

        def forward(self, x, modulation, index):
            ops = torch.ops.h3cupy
            chunk = [modulation[:, i * D : (i + 1) * D] for i in range(6)]
            q, k, v = ops.fp8_pre_attention(
                x,
                self.norm1,
                chunk[1],
                chunk[0],
                index,
                self.qkv_q,
                self.qkv_s,
                self.q_norm,
                self.k_norm,
                self.rope,
            )
            # [M, 56, 128] -> [1, 56, M, 128]: every token attends to every token (P = 1)
            heads = (t.transpose(0, 1).unsqueeze(0) for t in (q, k, v))
            o = F.scaled_dot_product_attention(*heads)
            attn = o.squeeze(0).transpose(0, 1).reshape(x.shape[0], HEADS * HD)
            h = ops.fp8_out_proj(attn, self.o_q, self.o_s, chunk[2], index, x)
            return ops.mlp_fp8(
                h,
                self.norm2,
                chunk[4],
                chunk[3],
                index,
                chunk[5],
                h,
                self.fc1_q,
                self.fc1_s,
                self.fc2_q,
                self.fc2_s,
            )

    return FP8Block


def build(m: int):
    """The block on the GPU with the FP8 weights prepared by h3cupy's helpers, and its inputs in
    the model's distributions for ``m`` tokens: ``(module, (x, modulation, index))``."""
    import torch

    import h3cupy
    import h3cupy.torch_ops  # noqa: F401  (registers torch.ops.h3cupy.*)
    from h3cupy.reference import inputs
    from h3cupy.testing import torch_cuda

    rng = np.random.default_rng(0)
    host = inputs.pre_attention_inputs(m, rows=9, rng=rng)
    mlp_host = inputs.mlp_inputs(1, rows=9, rng=rng)
    qkv_q, qkv_s = h3cupy.quantize_minimax_h3_qkv_weight_fp8(torch_cuda(host["qkv_weight"]))
    o_w = torch_cuda(inputs.normal_bf16((D, HEADS * HD), 0.01, rng))
    o_q, o_s = h3cupy.quantize_minimax_h3_o_weight_fp8(o_w)
    fc1_q, fc1_s = h3cupy.prepare_minimax_h3_fc1_weight_fp8(torch_cuda(mlp_host["fc1_weight"]))
    fc2_q, fc2_s = h3cupy.prepare_minimax_h3_fc2_weight_fp8(torch_cuda(mlp_host["fc2_weight"]))
    module = make_block(torch)(
        norm1=torch_cuda(host["x_norm_weight"]),
        norm2=torch_cuda(mlp_host["x_norm_weight"]),
        q_norm=torch_cuda(host["q_norm_weight"]),
        k_norm=torch_cuda(host["k_norm_weight"]),
        rope=torch_cuda(host["rope_cos_sin"]),
        qkv_q=qkv_q,
        qkv_s=qkv_s,
        o_q=o_q,
        o_s=o_s,
        fc1_q=fc1_q,
        fc1_s=fc1_s,
        fc2_q=fc2_q,
        fc2_s=fc2_s,
    )
    return module, tuple(torch_cuda(host[k]) for k in ("x", "modulation", "adaln_index"))


def on_gpu(m: int) -> None:
    import torch

    module, args = build(m)

    print(f"GPU: {torch.cuda.get_device_name()}, M = {m} tokens, torch {torch.__version__}")
    eager = module(*args).clone()
    compiled = torch.compile(module, fullgraph=True, mode="reduce-overhead")
    for _ in range(3):  # the first calls compile and record; later ones replay the graph
        got = compiled(*args).clone()  # a replay reuses its output memory: keep a copy
        torch.cuda.synchronize()
    same = torch.equal(got.view(torch.int16), eager.view(torch.int16))
    print(f"compiled block bit-identical to the eager block: {same}")

    # The two forms in alternating rounds of 10 blocks, the median round of each: the GPU's clock
    # drifts under sustained load, and timing one form after the other would read that drift as
    # a difference between them.
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    rounds = {"eager": [], "compiled (CUDA graph)": []}
    for _ in range(5):
        for form, fn in zip(rounds, (module, compiled), strict=True):
            start.record()
            for _ in range(10):
                fn(*args)
            stop.record()
            stop.synchronize()
            rounds[form].append(start.elapsed_time(stop) / 10)
    line = ", ".join(f"{form} {np.median(t):.3f} ms" for form, t in rounds.items())
    print(f"per block, median of 5 alternating rounds: {line}")
    if not same:
        sys.exit(1)


def on_meta(m: int) -> None:
    import torch

    import h3cupy.torch_ops  # noqa: F401

    def t(shape, dtype=torch.bfloat16):
        return torch.empty(shape, dtype=dtype, device="meta")

    e4m3, f32 = torch.float8_e4m3fn, torch.float32
    module = make_block(torch)(
        norm1=t((D,)),
        norm2=t((D,)),
        q_norm=t((HD,)),
        k_norm=t((HD,)),
        rope=t((m, 96)),
        qkv_q=t((3 * HEADS * HD, D), e4m3),
        qkv_s=t((3 * HEADS * HD,), f32),
        o_q=t((D, HEADS * HD), e4m3),
        o_s=t((D,), f32),
        fc1_q=t((28672, D), e4m3),
        fc1_s=t((28672,), f32),
        fc2_q=t((D, 14336), e4m3),
        fc2_s=t((D,), f32),
    )
    # dynamo traces the whole block (fullgraph: a graph break would raise) through the ops' fake
    # implementations; backend="eager" runs the traced graph on the meta tensors as it is
    traced = torch.compile(module, fullgraph=True, backend="eager")
    out = traced(t((m, D)), t((9, 6 * D)), t((m,), torch.int64))
    print(
        "No sm_90a GPU here: the block traced by torch.compile(fullgraph=True) on meta tensors "
        f"(the ops' fake implementations), no graph break: out {list(out.shape)} {out.dtype}"
    )


def main() -> None:
    m = int(sys.argv[1]) if len(sys.argv) > 1 else 4824
    try:
        import torch  # noqa: F401
    except ImportError:
        print("This example needs torch (pip install torch).")
        return
    from h3cupy.testing import gpu_available

    if gpu_available():
        from h3cupy.core import arch

        if arch.current_target() == "sm_90a":
            on_gpu(m)
            return
    on_meta(m)


if __name__ == "__main__":
    main()
