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
    args = ap.parse_args()

    from h3cupy.core import jit
    from h3cupy.ops import out_proj

    base = out_proj.OUT_PROJ

    def variant_spec(v):
        name, _, defs = v.partition("=")
        return name, jit.ModuleSpec(
            base.file,
            base.names,
            base.defines + ("H3_FUSED_PROBE=1",) + tuple(filter(None, defs.split(","))),
        )

    if args.prebuild:
        for v in ["probe="] + args.variant:
            print(jit.build(variant_spec(v)[1], args.prebuild)[0].name, flush=True)
        return

    import cupy
    import torch

    import h3cupy
    from benchmarks.ops_fp8 import without_quant_launch
    from h3cupy.core import arch
    from h3cupy.testing import bench_graphs

    target = arch.device_target(0)
    builds = {}
    for v in ["probe="] + args.variant:
        name, spec = variant_spec(v)
        cubin, lowered = jit.build(spec, target)
        module = cupy.RawModule(path=str(cubin))
        kernels = {n: module.get_function(lowered[n]) for n in spec.names}
        counters = cupy.ndarray((8,), cupy.uint64, module.get_global("h3_probe"))
        builds[name] = (kernels, counters)
    real_get = jit.get_kernel
    active = {"build": None}

    def get_kernel(s, name, t=None):
        if s is base and active["build"] is not None:
            return builds[active["build"]][0][name]
        return real_get(s, name, t)

    jit.get_kernel = get_kernel

    def with_build(build, fused, fn):
        def call(i):
            old = active["build"], out_proj.FUSED_QUANT
            active["build"], out_proj.FUSED_QUANT = build, fused
            try:
                return fn(i)
            finally:
                active["build"], out_proj.FUSED_QUANT = old

        return call

    d, attn_k = 5376, 7168
    rows = []
    for m in args.m:
        g = torch.Generator(device="cuda").manual_seed(0)
        attn = torch.randn(m, attn_k, device="cuda", generator=g).bfloat16()
        wt = (torch.randn(d, attn_k, device="cuda", generator=g) * 0.01).bfloat16()
        wq, ws = h3cupy.quantize_minimax_h3_o_weight_fp8(wt)
        gate = torch.randn(9, d, device="cuda", generator=g).bfloat16()
        idx = torch.randint(0, 9, (m,), device="cuda", dtype=torch.int32, generator=g)
        res = torch.randn(m, d, device="cuda", generator=g).bfloat16()
        out = torch.empty_like(res)
        aq = torch.empty(m, attn_k, dtype=torch.float8_e4m3fn, device="cuda")
        asc = torch.empty(m, dtype=torch.float32, device="cuda")
        flags = torch.empty(
            out_proj._flags_words(m, attn_k, True), dtype=torch.int32, device="cuda"
        )
        ins = (attn, wq, ws, gate, idx, res)

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
        with_build(None, True, op)(0)
        want = out.clone()
        for b, (_, counters) in builds.items():
            counters.fill(0)
            out.fill_(float("nan"))
            with_build(b, True, op)(0)
            torch.cuda.synchronize()
            row[f"same_{b}"] = bool(torch.equal(out.view(torch.int16), want.view(torch.int16)))
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
        rows.append(row)
        print(json.dumps(row, indent=1), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
