"""Benchmark: minimax_h3_bf16_pre_attention at the production centres against the chains a user
would assemble, timed in one run (CUDA-graph replays, interleaved, median).

T = 38592 tokens split over P Ulysses ranks: M = T / P for P in {8, 4, 2, 1}. Baselines:
* torch eager chain of the same math (RMSNorm, AdaLN gather, cuBLAS GEMM, Q/K RMSNorm, RoPE, pack);
* the same chain under torch.compile;
* the bare cuBLAS GEMM (``torch.mm``) of the projection alone.

    PYTHONPATH=. python3 benchmarks/pre_attention.py --json out.json [--p 8 4 2 1]

``--t`` changes T (so that one M can be timed at several P, i.e. several pack strides);
``--breakdown`` adds each kernel launch's time (benchmarks/ops_fp8.py's kernel_breakdown).
"""

from __future__ import annotations

import argparse
import datetime
import json

import numpy as np

T = 38592
D, HEADS, HD = 5376, 56, 128


def torch_chain(x, w, scale, shift, idx, qkv_w, qn, kn, cs, p, eps=1e-5):
    """The pre-attention math in plain torch ops (identity positions)."""
    import torch

    m, rows = x.shape[0], scale.shape[0]
    xf = x.float()
    n = (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * w.float()).bfloat16()
    valid = (idx >= 0) & (idx < rows)
    i = idx.clamp(0, rows - 1)
    s1 = (scale[i].float() + 1).bfloat16()
    a = torch.addcmul(shift[i].float(), n.float(), s1.float()).bfloat16()
    a = torch.where(valid[:, None], a, torch.zeros_like(a))
    y = torch.mm(a, qkv_w.t()).view(m, 3, HEADS, HD)
    c = cs[:m, None, :48].float()
    s = cs[:m, None, 48:96].float()

    def norm_rope(t, g):
        tf = t.float()
        t = (tf * torch.rsqrt(tf.pow(2).mean(-1, keepdim=True) + eps) * g.float()).bfloat16()
        lo, hi = t[..., :48].float(), t[..., 48:96].float()
        return torch.cat(
            [(lo * c - hi * s).bfloat16(), (hi * c + lo * s).bfloat16(), t[..., 96:]], -1
        )

    q = norm_rope(y[:, 0], qn)
    k = norm_rope(y[:, 1], kn)
    packed = torch.stack([q, k, y[:, 2]], 2)  # [M, H, 3, 128]
    return packed.view(m, p, HEADS // p, 3, HD).transpose(0, 1).contiguous()


def op_inputs(m: int, p: int, rng):
    """The op's inputs at M rows for Ulysses degree P, in the model's distributions:
    ``(chain_args, out, workspace)`` with chain_args = (x, w, scale, shift, idx, qkv_w, qn, kn,
    cs, p) as :func:`torch_chain` takes them (scripts/probe_engine.py builds the same)."""
    import torch

    from h3cupy.reference import inputs
    from h3cupy.testing import torch_cuda as dev

    host = inputs.prologue_inputs(m, rows=9, rng=rng)

    mod = dev(host["modulation"])
    x, w, idx = dev(host["x"]), dev(host["x_norm_weight"]), dev(host["adaln_index"])
    scale, shift = mod[:, D : 2 * D], mod[:, 0:D]
    qkv_w = (torch.randn(3 * HEADS * HD, D, device="cuda") * 0.01).bfloat16()
    qn = (torch.rand(HD, device="cuda") * 0.2 + 0.9).bfloat16()
    kn = (torch.rand(HD, device="cuda") * 0.2 + 0.9).bfloat16()
    cs = dev(inputs.rope_cache(m))
    out = torch.empty((p, m, HEADS // p, 3, HD), dtype=torch.bfloat16, device="cuda")
    ws = torch.empty((m, D), dtype=torch.bfloat16, device="cuda")
    return (x, w, scale, shift, idx, qkv_w, qn, kn, cs, p), out, ws


def run_one(
    p: int,
    rng,
    compiled,
    reps: int,
    t: int = T,
    breakdown: bool = False,
    energy: bool = False,
    fused: bool = True,
    order: str = "balanced",
) -> dict:
    import torch

    from h3cupy.ops.pre_attention import minimax_h3_bf16_pre_attention
    from h3cupy.testing import bench_graphs, sustained_fields

    m = t // p
    chain_args, out, ws = op_inputs(m, p, rng)
    qkv_w = chain_args[5]
    a_in = torch.randn(m, D, device="cuda").bfloat16()

    def h3():
        minimax_h3_bf16_pre_attention(*chain_args[:9], ulysses_degree=p, out=out, workspace=ws)

    from ops_fp8 import with_setting  # benchmarks/ is the script's directory

    from h3cupy.core import launch
    from h3cupy.ops import gemm, pre_attention

    fns = {
        "h3": lambda i: h3(),
        # A/B forms in the same run: the tail split off, the programmatic dependent launch on,
        # the one-head-at-a-time epilogue (pre_attention.BF16_EPILOGUE), the prologue as a launch
        # of its own (pre_attention.BF16_FUSED_PROLOGUE = False, the default until session 25);
        # below, the single-launch form with either epilogue
        "h3_no_tail": with_setting(gemm, "TAIL_SPLIT", False, lambda i: h3()),
        "h3_pdl": with_setting(launch, "PDL", True, lambda i: h3()),
        "h3_heads": with_setting(pre_attention, "BF16_EPILOGUE", "heads", lambda i: h3()),
        "h3_two_launch": with_setting(pre_attention, "BF16_FUSED_PROLOGUE", False, lambda i: h3()),
        "eager": lambda i: torch_chain(*chain_args),
        "gemm": lambda i: torch.mm(a_in, qkv_w.t()),
    }
    if fused:  # the two launches with the one-head epilogue: the fourth combination of the two
        fns["h3_two_launch_heads"] = with_setting(
            pre_attention,
            "BF16_FUSED_PROLOGUE",
            False,
            with_setting(pre_attention, "BF16_EPILOGUE", "heads", lambda i: h3()),
        )
    if compiled is not None:
        compiled(*chain_args)  # compile outside the capture
        fns["compiled"] = lambda i: compiled(*chain_args)
    times = bench_graphs(fns, reps=reps, energy=energy, order=order)
    row = {"P": p, "M": m, "T": t, **{f"{k}_ms": v["median_ms"] for k, v in times.items()}}
    # each form's spread over the rounds (at P = 1 the forms' medians have moved by 4-10% from
    # run to run: the spread says how much of a difference one run can resolve)
    row["spread_ms"] = {k: [v["min_ms"], v["max_ms"]] for k, v in times.items()}
    # each form's median after each predecessor (testing.bench_graphs: the carryover)
    row["after_ms"] = {k: v["after_ms"] for k, v in times.items()}
    row["order"] = order
    row.update(sustained_fields(times))
    if breakdown:
        from ops_fp8 import kernel_breakdown  # benchmarks/ is the script's directory

        row["kernels_ms"] = kernel_breakdown(fns["h3"])
    row["speedup_vs_eager"] = row["eager_ms"] / row["h3_ms"]
    row["speedup_vs_gemm"] = row["gemm_ms"] / row["h3_ms"]
    if "compiled_ms" in row:
        row["speedup_vs_compiled"] = row["compiled_ms"] / row["h3_ms"]
    return row


def main() -> None:
    from h3cupy.testing import add_order_argument

    ap = argparse.ArgumentParser()
    ap.add_argument("--p", type=int, nargs="+", default=[8, 4, 2, 1])
    ap.add_argument("--t", type=int, default=T, help="tokens over the P ranks (M = T / P)")
    ap.add_argument("--breakdown", action="store_true", help="also time each kernel launch")
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--no-compile", action="store_true")
    ap.add_argument(
        "--no-fused",
        action="store_true",
        help="leave out h3_two_launch_heads (an older name: until session 25 it left out the "
        "single-launch forms, then not the default)",
    )
    ap.add_argument(
        "--energy",
        action="store_true",
        help="also replay each form back to back (1 s windows, twice) sampling NVML: sustained"
        " time, mean SM clock, clock cycles and energy per call (testing.bench_graphs)",
    )
    add_order_argument(ap)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()

    import torch

    from h3cupy.testing import device_info

    info = device_info()
    print(f"{info['gpu']} ({info['target']}), T = {args.t}")
    print(
        f"{'P':>2}{'M':>7}{'h3 ms':>9}{'eager':>9}{'compiled':>10}{'GEMM':>8}"
        f"{'vs eager':>10}{'vs compiled':>12}{'vs GEMM':>9}"
    )
    rng = np.random.default_rng(0)
    compiled = None if args.no_compile else torch.compile(torch_chain, dynamic=False)
    results = []
    for p in args.p:
        row = run_one(
            p,
            rng,
            compiled,
            args.reps,
            args.t,
            args.breakdown,
            args.energy,
            not args.no_fused,
            args.order,
        )
        results.append(row)
        nan = float("nan")
        print(
            f"{p:>2}{row['M']:>7}{row['h3_ms']:>9.3f}{row['eager_ms']:>9.3f}"
            f"{row.get('compiled_ms', nan):>10.3f}{row['gemm_ms']:>8.3f}"
            f"{row['speedup_vs_eager']:>10.2f}{row.get('speedup_vs_compiled', nan):>12.2f}"
            f"{row['speedup_vs_gemm']:>9.2f}"
        )
        print(
            f"   without the tail split {row['h3_no_tail_ms']:.3f} ms; with the programmatic"
            f" launch {row['h3_pdl_ms']:.3f} ms; the epilogue one head at a time"
            f" {row['h3_heads_ms']:.3f} ms; the prologue as its own launch"
            f" {row['h3_two_launch_ms']:.3f} ms"
        )
        if "h3_two_launch_heads_ms" in row:
            print(
                f"   two launches with the one-head epilogue {row['h3_two_launch_heads_ms']:.3f} ms"
            )
        if "sustained_speedup_vs_compiled" in row:
            print(
                f"   sustained: h3 {row['h3_sustained_ms']:.3f} ms at "
                f"{row['h3_clock_mhz']:.0f} MHz, compiled {row['compiled_sustained_ms']:.3f} ms at "
                f"{row['compiled_clock_mhz']:.0f} MHz, GEMM {row['gemm_sustained_ms']:.3f} ms: "
                f"{row['sustained_speedup_vs_compiled']:.2f}x compiled, "
                f"{row['sustained_speedup_vs_gemm']:.2f}x GEMM"
            )
        for k, v in row.get("kernels_ms", {}).items():
            print(f"   {k:<40}{v:>9.3f} ms")
        torch.cuda.empty_cache()
    doc = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "device": info,
        "torch": torch.__version__,
        "T": args.t,
        "results": results,
    }
    if args.json:
        with open(args.json, "w") as f:
            json.dump(doc, f, indent=1)


if __name__ == "__main__":
    main()
