"""Where the single-launch FP8 out_proj's time goes (a diagnostic, not a test).

Builds kernels/out_proj.cu with -DH3_FUSED_PROBE (globaltimer counters in the fused kernels'
hooks, see the top of that file) and, per ``--variant NAME=DEFINE[,DEFINE]``, with further
diagnostic switches (H3_FUSED_EVICT, H3_FUSED_NOFENCE, H3_FUSED_NOSPARE: see out_proj.cu). For each
M it times, in CUDA graphs in one run, the op's two-launch form, that form without its
quantization launch, and the single-launch form and that GEMM kernel on quantized input on each
build; then one eager launch per build checks its bytes against the default's (``same_<name>``)
and reads the counters: the TMA producers' waits on the row counters, the spare warps' busy time and
rows, the consumer warps' first-round quantization time. Variants that drop a fence are for
timing only (their act_q may be read stale).

    PYTHONPATH=. python3 scripts/probe_fused.py [--m 4824 38592] [--variant evict=H3_FUSED_EVICT]
    PYTHONPATH=. python3 scripts/probe_fused.py --prebuild sm_90a [--variant ...]  # no GPU

``--op nvfp4``: the NVFP4 out_proj's single launch (Hopper path) instead. Its timing builds carry
only their variant's switches: the probe counters cost the spare warps 8-16 bytes of spills, so
they come from a build of their own ("probe", timed too). Forms: the two-launch form, its GEMM
launch alone (the quantization and both dequantizations skipped: a' and w' from an earlier
call), and the single launch without the w' launch on each build. Useful variants:
``noaprime=H3_FUSED_NOAPRIME`` (the a' stores dropped), ``idle=H3_FUSED_IDLESPARE,H3_FUSED_NOPOLL``
(only the consumers' first round quantizes), ``nopoll=H3_FUSED_NOPOLL`` (no tile waits). Those
read an earlier call's a' (the same bytes, as every call quantizes the same attn_out).
"""

from __future__ import annotations

import argparse
import json

import numpy as np


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--m", type=int, nargs="+", default=[4824, 38592])
    ap.add_argument("--variant", nargs="*", default=[])
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--json", default=None)
    ap.add_argument("--prebuild", default=None, metavar="TARGET", help="fill the cache, no GPU")
    ap.add_argument("--op", choices=["fp8", "nvfp4"], default="fp8")
    args = ap.parse_args()

    from h3cupy.core import jit
    from h3cupy.ops import out_proj

    base = out_proj.OUT_PROJ
    nv = args.op == "nvfp4"

    def variant_spec(v):
        name, _, defs = v.partition("=")
        probe = ("H3_FUSED_PROBE=1",) if not nv or name == "probe" else ()
        return name, jit.ModuleSpec(
            base.file, base.names, base.defines + probe + tuple(filter(None, defs.split(",")))
        )

    if args.prebuild:
        for v in ["probe="] + args.variant:
            print(jit.build(variant_spec(v)[1], args.prebuild)[0].name, flush=True)
        return

    import cupy

    from h3cupy.core import arch

    target = arch.device_target(0)
    builds = {}
    for v in ["probe="] + args.variant:
        name, spec = variant_spec(v)
        cubin, lowered = jit.build(spec, target)
        module = cupy.RawModule(path=str(cubin))
        kernels = {n: module.get_function(lowered[n]) for n in spec.names}
        counters = None
        if "H3_FUSED_PROBE=1" in spec.defines:
            counters = cupy.ndarray((8,), cupy.uint64, module.get_global("h3_probe"))
        builds[name] = (kernels, counters)
    real_get = jit.get_kernel
    active = {"build": None}

    def get_kernel(s, name, t=None):
        if s is base and active["build"] is not None:
            return builds[active["build"]][0][name]
        return real_get(s, name, t)

    jit.get_kernel = get_kernel

    flag = "NVFP4_FUSED_QUANT" if nv else "FUSED_QUANT"

    def with_build(build, fused, fn):
        def call(i):
            old = active["build"], getattr(out_proj, flag)
            active["build"] = build
            setattr(out_proj, flag, fused)
            try:
                return fn(i)
            finally:
                active["build"] = old[0]
                setattr(out_proj, flag, old[1])

        return call

    rows = (nvfp4_rows if nv else fp8_rows)(args, builds, with_build)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


def op_inputs(m: int, weight_quant):
    """attn_out, the weight quantized by ``weight_quant``, gate, gate_index and residual at M =
    ``m`` (seeded), and the output buffer."""
    import torch

    d, attn_k = 5376, 7168
    g = torch.Generator(device="cuda").manual_seed(0)
    attn = torch.randn(m, attn_k, device="cuda", generator=g).bfloat16()
    wt = (torch.randn(d, attn_k, device="cuda", generator=g) * 0.01).bfloat16()
    wquant = weight_quant(wt)
    gate = torch.randn(9, d, device="cuda", generator=g).bfloat16()
    idx = torch.randint(0, 9, (m,), device="cuda", dtype=torch.int32, generator=g)
    res = torch.randn(m, d, device="cuda", generator=g).bfloat16()
    return attn, wquant, (gate, idx, res), torch.empty_like(res)


def fp8_rows(args, builds, with_build) -> list[dict]:
    """The FP8 out_proj's forms per M (see the module docstring)."""
    import torch

    import h3cupy
    from benchmarks.ops_fp8 import without_quant_launch
    from h3cupy.ops import out_proj
    from h3cupy.testing import bench_graphs

    attn_k = 7168
    rows = []
    for m in args.m:
        attn, (wq, ws), gated, out = op_inputs(m, h3cupy.quantize_minimax_h3_o_weight_fp8)
        aq = torch.empty(m, attn_k, dtype=torch.float8_e4m3fn, device="cuda")
        asc = torch.empty(m, dtype=torch.float32, device="cuda")
        flags = torch.empty(
            out_proj._flags_words(m, attn_k, True), dtype=torch.int32, device="cuda"
        )
        ins = (attn, wq, ws, *gated)

        def op(i, ins=ins, out=out, aq=aq, asc=asc, flags=flags):
            return h3cupy.minimax_h3_fp8_out_proj(
                *ins, out=out, act_q=aq, act_scale=asc, workspace_flags=flags
            )

        fns = {
            "two_launch": with_build(None, False, op),
            "no_quant": with_build(None, False, without_quant_launch(op)),
            "fused": with_build(None, True, op),
        }
        for b in builds:
            fns[f"fused_{b}"] = with_build(b, True, op)
            fns[f"no_quant_{b}"] = with_build(b, False, without_quant_launch(op))
        t = bench_graphs(fns, reps=args.reps)
        row = {"M": m, **{f"{k}_ms": v["median_ms"] for k, v in t.items()}}
        check_builds(row, builds, with_build, op, out)
        rows.append(row)
        print(json.dumps(row, indent=1), flush=True)
    return rows


def check_builds(row, builds, with_build, op, out) -> None:
    """One eager single-launch call per build into a NaN-filled ``out``: ``same_<build>`` (its
    bytes against the default build's) and, for builds with the probe, ``counters_<build>``."""
    import torch

    with_build(None, True, op)(0)
    want = out.clone()
    for b, (_, counters) in builds.items():
        if counters is not None:
            counters.fill(0)
        out.fill_(float("nan"))
        with_build(b, True, op)(0)
        torch.cuda.synchronize()
        row[f"same_{b}"] = bool(torch.equal(out.view(torch.int16), want.view(torch.int16)))
        if counters is None:
            continue
        c = counters.get().astype(np.float64)
        row[f"counters_{b}"] = {
            "wait_us_per_cta": c[0] / 1e3 / 132,
            "tiles_waited": c[1],
            "poll_us_per_tile": c[2] / 1e3 / max(c[3], 1),
            "spare_rows": c[5],
            "spare_us_per_row": c[4] / 1e3 / max(c[5], 1),
            "spare_longest_us": c[6] / 1e3,
            "consumer_first_round_longest_us": c[7] / 1e3,
        }


def nvfp4_rows(args, builds, with_build) -> list[dict]:
    """The NVFP4 out_proj's forms per M (see the module docstring)."""
    import torch

    import h3cupy
    from benchmarks.ops_fp8 import skipping
    from h3cupy.testing import bench_graphs

    d, attn_k = 5376, 7168
    rows = []
    for m in args.m:
        attn, (wq, wsf, gw), gated, out = op_inputs(m, h3cupy.quantize_minimax_h3_o_weight_nvfp4)
        ga = h3cupy.nvfp4_global_scale_from_amax(float(attn.float().abs().max()))
        ws = {
            "act_q": torch.empty(m, attn_k // 2, dtype=torch.uint8, device="cuda"),
            "act_sf": torch.empty(m, attn_k // 16, dtype=torch.uint8, device="cuda"),
            "workspace_a": torch.empty(m, attn_k, dtype=torch.bfloat16, device="cuda"),
            "workspace_w": torch.empty(d, attn_k, dtype=torch.bfloat16, device="cuda"),
        }

        def op(i, out=out, ws=ws, a=(attn, wq, wsf, gw, ga, *gated)):
            return h3cupy.minimax_h3_nvfp4_out_proj(*a, out=out, **ws)

        no_w = ("nvfp4_dequant_bf16_smxx",)
        fns = {
            "two_launch": with_build(None, False, op),
            "gemm_only": with_build(
                None, False, skipping(op, ("fp4_quantize_smxx", "nvfp4_dequant_bf16_smxx"))
            ),
            "fused_only": with_build(None, True, skipping(op, no_w)),
        }
        for b in builds:
            fns[f"fused_only_{b}"] = with_build(b, True, skipping(op, no_w))
        with_build(None, True, op)(0)  # a', w' and the workspaces filled before any capture
        t = bench_graphs(fns, reps=args.reps)
        row = {"M": m, **{f"{k}_ms": v["median_ms"] for k, v in t.items()}}
        check_builds(row, builds, with_build, op, out)
        rows.append(row)
        print(json.dumps(row, indent=1), flush=True)
    return rows


if __name__ == "__main__":
    main()
