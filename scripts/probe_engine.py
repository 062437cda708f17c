"""Where the sm_90a engine's consumer time goes, per operator (a diagnostic, not a test).

Builds the engine kernels that the operators run by default with -DH3_ENGINE_PROBE (globaltimer
counters in the cooperative consumer loop, h3/gemm_sm90.cuh), runs each form once and reports, per
unit (tile or tail-split k-range) of a consumer warpgroup: the mainloop, the wait for the
epilogue's prefetched operand, the epilogue (tail-split sums included), and the epilogue's share
of the warpgroup's time, when the tensor cores of its CTA idle; and, in kernels without producer
hooks, how long each stage's loads took from issue to landing, and how many of them the
consumers were already waiting for. It also times each form with and
without the probe build in CUDA graphs, so the probe's own cost is visible.

    PYTHONPATH=. python3 scripts/probe_engine.py [--m 4824 38592] [--json out.json]
    PYTHONPATH=. python3 scripts/probe_engine.py --prebuild sm_90a   # fill the cache, no GPU

With ``--ab NAME`` it times instead, in one run (CUDA graphs, interleaved), forms against the
same forms on a diagnostic build (AB below), and checks that both give the same bytes:
``vec``: the FP8 epilogues without their shared-memory vectors (-DH3_NO_EPI_VEC: the epilogues as
before session 10), on the plain FP8 GEMM at the O and FC2 shapes, the FP8 out_proj and the MLP;
``uniform``: the operators (FP8 out_proj, MLP, FP8 and BF16 pre-attention) and the plain GEMMs
(FP8 O / QKV, bf16 QKV) against the engine as before session 20 (-DH3_WG_DIVERGENT: the
warpgroup index, the consumers' warp index and the tail split's barrier result not passed through
a shuffle, so that ptxas holds the consumers' code divergent and builds each wgmma descriptor in
vector registers; "default N x faster" above 1.0 favours the default);
``tiles``: the same cases against the build with the consumers' tile index carried beside the
tile count and the BF16 pre-attention's second row's RoPE operands loaded early (-DH3_T_CARRIED:
the engine as in session 20; "default N x faster" above 1.0 favours the default);
``stage5``: the plain FP8 GEMM (QKV, O, FC1, FC2 shapes) with 8 KiB of epilogue staging per
warpgroup (-DH3_STAGING_8K, no vectors), which gives its 192-column tiles a 5-stage ring;
``group16`` / ``group32``: the plain FP8 GEMM with the tile order grouped by 16 / 32 M-tiles
instead of 8 (-DH3_GROUP_M; session 11 timed them within +-2% in graph replays, NOTES.md);
``rows``: the single-launch FP8 out_proj and the MLP (whose FC2 runs the out_proj's kernel) with
the spare warps' rows loaded through L1 by each warp, as before session 22 (-DH3_FUSED_LDG_ROWS;
the default stages each row in shared memory by a bulk copy), and the plain FP8 O GEMM as a
control that the define does not touch ("default N x faster" above 1.0 favours the default);
``panomath`` (session 26): the BF16 pre-attention's single launch without the RMSNorm / RoPE
(-DH3_PA_NOMATH: wrong outputs, the math's cost) against the default, with the plain bf16 QKV
GEMM as a control; since session 27 also the FP8 pre-attention's default (its single launch,
bf16 out) without the math, with the plain FP8 QKV GEMM as a control; ``pacs0`` (session 27):
the same cases with every row's RoPE operands read from cache row 0 (-DH3_PA_CS0: L1 hits,
wrong outputs), what the operands' load latency costs the epilogue; ``paprefetch`` (session
27): the BF16 op's single launch with each thread's two RoPE cache lines prefetched into L1
before each unit's mainloop (-DH3_PA_CS_PREFETCH, the same bytes), the plain bf16 QKV GEMM as a
control;
``fg4`` / ``fg2``: the BF16 pre-attention's single-launch form (pre_attention.BF16_FUSED_PROLOGUE)
and its default with the tile order's first group 4 / 2 M-tile pairs instead of 8
(-DH3_FIRST_GROUP_M: 1024 / 512 first-round rows written by the consumers instead of 2048;
scripts/spare_rows_model.py puts the spare rows' smallest slack at ~190 / ~40 us). Another order
puts other tiles in the tail split's last round, so "same bytes" may read False there.
(Session 29's ``paoff`` / ``paoffcs0`` / ``paoffr1`` A/Bs, the Q/K math on the spare producer
warps, and ``papacked``, the packed-word epilogue that is now the default, were removed in
session 30 with what they measured; session 30's ``stagger``, warpgroup 2 starting 3 k-tiles
after warpgroup 1, in session 31 (level on the ops, +0-0.8% on the plain bf16 GEMMs; its code
is at commit 3699be2): benchmarks/NOTES.md, "Session 30" and "Session 31".)
``--energy`` adds bench_graphs' sustained windows: clock cycles and energy per call.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))


#: A/B builds: name -> (defines, only the GEMM_WGMMA module)
AB = {
    "vec": (("H3_NO_EPI_VEC=1",), False),
    "stage5": (("H3_NO_EPI_VEC=1", "H3_STAGING_8K=1"), True),
    "uniform": (("H3_WG_DIVERGENT=1",), False),
    "tiles": (("H3_T_CARRIED=1",), False),
    "group16": (("H3_GROUP_M=16",), True),
    "group32": (("H3_GROUP_M=32",), True),
    "rows": (("H3_FUSED_LDG_ROWS=1",), False),
    "fg4": (("H3_FIRST_GROUP_M=4",), False),
    "fg2": (("H3_FIRST_GROUP_M=2",), False),
    "panomath": (("H3_PA_NOMATH=1",), False),
    "pacs0": (("H3_PA_CS0=1",), False),
    "paprefetch": (("H3_PA_CS_PREFETCH=1",), False),
}


def probe_specs(define="H3_ENGINE_PROBE=1", gemm_only: bool = False):
    """{base spec: its build with ``define`` (a string or a tuple) restricted to the kernels the
    forms below run}."""
    from h3cupy.core import jit
    from h3cupy.ops import gemm, mlp, out_proj, pre_attention

    used = {
        gemm.GEMM_WGMMA: [
            gemm._wgmma_name("e4m3", 192, gemm.FP8_PROMOTE, 2, False),
            gemm._wgmma_name("e4m3", 192, gemm.FP8_PROMOTE, 1, False),
            gemm._wgmma_name("bf16", 256, 0, 2, False),
            gemm._wgmma_name("bf16", 224, 0, 2, False),
        ],
        out_proj.OUT_PROJ: [
            f"h3::out_proj_fp8{f}{c}_sm90" for f in ("", "_fused") for c in ("_x2", "_n192")
        ],
        mlp.MLP: ["h3::mlp_fc1_fp8_x2_sm90", "h3::mlp_fc1_fp8_n192_sm90"],
        pre_attention.PRE_ATTENTION: [
            "h3::pre_attention_bf16_x2_sm90",
            "h3::pre_attention_bf16_x2_heads_sm90",
            "h3::pre_attention_bf16_x2_fused_sm90",
        ],
        pre_attention.PRE_ATTENTION_FP8: [
            "h3::pre_attention_fp8_n192_sm90<0>",
            "h3::pre_attention_fp8_n192_fused_sm90<0>",
            "h3::pre_attention_fp8_m192_x2_sm90<0>",
            "h3::pre_attention_fp8_m192_sm90<0>",
            "h3::pre_attention_fp8_x2_sm90<0>",
        ],
    }
    defines = (define,) if isinstance(define, str) else tuple(define)
    return {
        s: jit.ModuleSpec(s.file, tuple(names), s.defines + defines)
        for s, names in used.items()
        if not gemm_only or s is gemm.GEMM_WGMMA
    }


def bf16_pre_attention_form(m: int, epilogue: str = "rows", fused: bool = False):
    """The BF16 pre-attention at M (P = 1 layout), as benchmarks/pre_attention.py builds it, with
    the epilogue form ``epilogue`` (pre_attention.BF16_EPILOGUE), in one launch with ``fused``
    (pre_attention.BF16_FUSED_PROLOGUE)."""
    from ops_fp8 import with_setting
    from pre_attention import op_inputs

    from h3cupy.ops import pre_attention
    from h3cupy.ops.pre_attention import minimax_h3_bf16_pre_attention

    args, out, ws = op_inputs(m, 1, np.random.default_rng(0))

    def fn(i):
        minimax_h3_bf16_pre_attention(*args[:9], ulysses_degree=1, out=out, workspace=ws)

    fn = with_setting(pre_attention, "BF16_FUSED_PROLOGUE", fused, fn)
    fn = with_setting(pre_attention, "BF16_EPILOGUE", epilogue, fn)
    fn.out = out  # the A/B compares the bytes of both builds
    return fn


def bf16_gemm_form(m: int, n: int, k: int):
    import torch

    from h3cupy.ops import gemm

    a = (torch.randn(m, k, device="cuda") * 0.5).bfloat16()
    b = (torch.randn(n, k, device="cuda") * 0.01).bfloat16()
    out = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
    return lambda i: gemm.gemm_wgmma(a, b, fmt="bf16", out=out)


def fp8_gemm_form(m: int, n: int, k: int, cluster=None):
    """The engine's plain FP8 GEMM (per-row x per-column scales) on random operands; ``cluster``
    1 / 2: the default's 192-column tiles on single CTAs / in clusters of two."""
    import torch

    from h3cupy.ops import gemm

    a = (torch.randn(m, k, device="cuda") * 0.5).to(torch.float8_e4m3fn)
    b = (torch.randn(n, k, device="cuda") * 0.5).to(torch.float8_e4m3fn)
    rs = torch.rand(m, device="cuda") * 0.01
    cs = torch.rand(n, device="cuda") * 0.01
    out = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)

    def fn(i):
        kw = {} if cluster is None else {"tile_n": 192, "promote": 3, "cluster": cluster}
        gemm.gemm_wgmma(a, b, fmt="e4m3", row_scale=rs, col_scale=cs, out=out, **kw)

    fn.out = out  # the A/B compares the bytes of both builds
    return fn


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--m", type=int, nargs="+", default=[4824, 38592])
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--json", default=None)
    ap.add_argument("--prebuild", default=None, metavar="TARGET")
    ap.add_argument("--ab", default=None, choices=sorted(AB), help="time forms against a build")
    ap.add_argument(
        "--probe-on", default=None, choices=sorted(AB), help="probe that A/B build's kernels"
    )
    ap.add_argument("--cases", nargs="*", default=None, help="probe only these cases")
    ap.add_argument(
        "--energy", action="store_true", help="--ab: also cycles and energy per call (sustained)"
    )
    args = ap.parse_args()

    import h3cupy  # noqa: F401  (registers every op)
    from h3cupy.core import jit

    probe_defines = ("H3_ENGINE_PROBE=1",) + tuple(AB[args.probe_on][0] if args.probe_on else ())
    only = AB[args.probe_on][1] if args.probe_on else False
    specs = probe_specs(*AB[args.ab]) if args.ab else probe_specs(probe_defines, only)
    # stage5's 5-stage ring and paprefetch's vector area need more than the default's layout
    wide = args.ab in ("stage5", "paprefetch") or args.probe_on in ("stage5", "paprefetch")
    if args.prebuild and args.ab:  # just that A/B's builds
        for s in specs.values():
            print(jit.build(s, args.prebuild)[0].name, flush=True)
        return
    if args.prebuild:
        for s in (
            [*probe_specs().values()]
            + [s for ab in AB.values() for s in probe_specs(*ab).values()]
            + [
                s
                for d, g in AB.values()
                for s in probe_specs(("H3_ENGINE_PROBE=1",) + d, g).values()
            ]
        ):
            print(jit.build(s, args.prebuild)[0].name, flush=True)
        return

    import cupy
    import torch
    from ops_fp8 import forms

    from h3cupy.core import arch
    from h3cupy.testing import bench_graphs

    target = arch.device_target(0)
    builds = {}
    for base, s in specs.items():
        cubin, lowered = jit.build(s, target)
        module = cupy.RawModule(path=str(cubin))
        kernels = {n: module.get_function(lowered[n]) for n in s.names}
        counters = (
            None
            if args.ab
            else cupy.ndarray((16,), cupy.uint64, module.get_global("h3_engine_probe"))
        )
        builds[base] = (kernels, counters)
    real_get = jit.get_kernel
    active = {"on": False}

    def get_kernel(spec, name, t=None):
        if active["on"] and spec in builds and name in builds[spec][0]:
            return builds[spec][0][name]
        return real_get(spec, name, t)

    jit.get_kernel = get_kernel

    from h3cupy.ops import gemm

    real_smem = gemm.wgmma_smem_bytes

    def probed(fn):
        def call(i):
            active["on"] = True
            if wide:
                gemm.wgmma_smem_bytes = lambda *a, **k: 232448
            try:
                return fn(i)
            finally:
                active["on"] = False
                gemm.wgmma_smem_bytes = real_smem

        return call

    rows = []
    if args.ab:
        shapes = {
            "o": (5376, 7168),
            "fc2": (5376, 14336),
            "qkv": (21504, 5376),
            "fc1": (28672, 5376),
        }
        for m in args.m:
            cases = {}
            if args.ab == "vec":
                f, *_ = forms("out_proj", m)
                cases.update(out_proj=f["h3"], fp8_gemm_o=f["engine"])
                cases["fp8_gemm_fc2"] = fp8_gemm_form(m, 5376, 14336)
                f, *_ = forms("mlp", m)
                cases["mlp"] = f["h3"]
            elif args.ab == "rows":
                for op in ("out_proj", "mlp"):
                    f, *_ = forms(op, m)
                    cases[op] = f["h3"]
                cases["fp8_gemm_o"] = fp8_gemm_form(m, 5376, 7168)
            elif args.ab == "paprefetch":  # the BF16 op only (the define is its epilogue's)
                cases["bf16_pre_attention_fused"] = bf16_pre_attention_form(m, fused=True)
                cases["bf16_gemm_qkv"] = bf16_gemm_form(m, 21504, 5376)  # control: untouched
            elif args.ab in ("panomath", "pacs0"):
                cases["bf16_pre_attention_fused"] = bf16_pre_attention_form(m, fused=True)
                f, *_ = forms("pre_attention", m)  # the FP8 op's default (session 27)
                cases["fp8_pre_attention"] = f["h3"]
                cases["bf16_gemm_qkv"] = bf16_gemm_form(m, 21504, 5376)  # control: untouched
                cases["fp8_gemm_qkv"] = fp8_gemm_form(m, 21504, 5376)  # control: untouched
            elif args.ab in ("fg4", "fg2"):
                cases["bf16_pre_attention_fused"] = bf16_pre_attention_form(m, fused=True)
                cases["bf16_pre_attention"] = bf16_pre_attention_form(m)
            elif args.ab in ("uniform", "tiles"):
                for op in ("out_proj", "mlp", "pre_attention"):
                    f, *_ = forms(op, m)
                    cases[op if op != "pre_attention" else "fp8_pre_attention"] = f["h3"]
                cases["bf16_pre_attention"] = bf16_pre_attention_form(m)
                cases["fp8_gemm_o"] = fp8_gemm_form(m, 5376, 7168)
                cases["fp8_gemm_qkv"] = fp8_gemm_form(m, 21504, 5376)
                cases["bf16_gemm_qkv"] = bf16_gemm_form(m, 21504, 5376)
            else:
                for s, (n, k) in shapes.items():
                    cases[f"fp8_gemm_{s}"] = fp8_gemm_form(m, n, k)
            if args.cases:  # (--cases: these only)
                cases = {k: v for k, v in cases.items() if k in args.cases}
            fns = {}
            for name, fn in cases.items():
                fns[name] = fn
                fns[f"{name}_ab"] = probed(fn)
            t = bench_graphs(fns, reps=args.reps, energy=args.energy)
            for name, fn in cases.items():
                a, b = t[name]["median_ms"], t[f"{name}_ab"]["median_ms"]
                sustained = {
                    f"{side}_{key}": t[f][key]
                    for side, f in (("default", name), ("ab", f"{name}_ab"))
                    for key in ("sustained_ms", "clock_mhz", "mcycles", "energy_mj", "power_w")
                    if key in t[f]
                }
                same = None
                outs = getattr(fn, "outs", None) or ([fn.out] if hasattr(fn, "out") else None)
                if outs:  # the same bytes from both builds
                    fn(0)
                    refs = [o.clone() for o in outs]
                    for o in outs:
                        o.fill_(float("nan"))
                    probed(fn)(0)
                    same = all(
                        torch.equal(r.view(torch.int16), o.view(torch.int16))
                        for r, o in zip(refs, outs, strict=True)
                    )
                rows.append(
                    {
                        "ab": args.ab,
                        "case": name,
                        "M": m,
                        "default_ms": a,
                        "ab_ms": b,
                        "default_speedup": b / a,
                        "same_bytes": same,
                        **sustained,
                    }
                )
                print(
                    f"{name:<14}{m:>7}  default {a:.4f} ms, {args.ab} build {b:.4f} ms: "
                    f"default {b / a:.3f}x faster; same bytes: {same}",
                    flush=True,
                )
                if "ab_mcycles" in sustained and "default_mcycles" in sustained:
                    print(
                        "   sustained: default "
                        f"{sustained['default_mcycles']:.3f} Mcycles, "
                        f"{sustained['default_energy_mj']:.1f} mJ at "
                        f"{sustained['default_clock_mhz']:.0f} MHz; {args.ab} build "
                        f"{sustained['ab_mcycles']:.3f} Mcycles, {sustained['ab_energy_mj']:.1f} mJ"
                        f" at {sustained['ab_clock_mhz']:.0f} MHz",
                        flush=True,
                    )
        _dump(rows, args.json)
        return
    for m in args.m:
        cases = {}
        f, *_ = forms("out_proj", m)
        cases.update(out_proj_fused=f["h3"], out_proj_gemm=f["h3_no_quant"], fp8_gemm_o=f["engine"])
        f, *_ = forms("pre_attention", m, other_tile=True)
        cases.update(
            fp8_pre_attention_n192=f["h3"],
            fp8_pre_attention_m192=f["h3_tile_m192"],
            fp8_pre_attention_m128=f["h3_tile_m128"],
        )
        f, *_ = forms("mlp", m)
        cases["mlp_fc1"] = f["h3"]  # FC2 runs out_proj.cu's kernel: reported as out_proj_*
        cases["bf16_pre_attention"] = bf16_pre_attention_form(m)
        cases["bf16_pre_attention_heads"] = bf16_pre_attention_form(m, "heads")
        cases["bf16_pre_attention_fused"] = bf16_pre_attention_form(m, fused=True)
        cases["bf16_gemm_qkv"] = bf16_gemm_form(m, 21504, 5376)
        cases["bf16_gemm_o"] = bf16_gemm_form(m, 5376, 7168)
        # the plain FP8 engine on the pre-attention's product (its 128 x 192 tiles, unpaired)
        cases["fp8_gemm_qkv"] = fp8_gemm_form(m, 21504, 5376)
        # the default's FP8 tiles in clusters of two (B multicast between a pair; the default
        # since session 11 runs them on single CTAs)
        cases["fp8_gemm_o_x2"] = fp8_gemm_form(m, 5376, 7168, cluster=2)
        if args.probe_on:  # that build's kernels differ from the default in gemm_wgmma only
            cases = {k: v for k, v in cases.items() if k.startswith(("fp8_gemm", "bf16_gemm"))}
        if args.cases:
            cases = {k: v for k, v in cases.items() if k in args.cases}
        for name, fn in cases.items():
            t = bench_graphs({"plain": fn, "probe": probed(fn)}, reps=args.reps)
            fn(0)
            torch.cuda.synchronize()
            for _, c in builds.values():
                c.fill(0)
            probed(fn)(0)
            torch.cuda.synchronize()
            for base, (_, c) in builds.items():
                v = c.get().astype(np.float64)
                if v[3] == 0:
                    continue
                units, epis = v[3], max(v[4], 1)
                busy = v[0] + v[1] + v[2]
                row = {
                    "case": name,
                    "M": m,
                    "module": Path(base.file).stem,
                    "plain_ms": t["plain"]["median_ms"],
                    "probe_ms": t["probe"]["median_ms"],
                    "units": units,
                    "epilogues": v[4],
                    "mainloop_us_per_unit": v[0] / 1e3 / units,
                    "prefetch_wait_us_per_unit": v[1] / 1e3 / units,
                    "epilogue_us_per_epilogue": v[2] / 1e3 / epis,
                    "epilogue_share": v[2] / busy,
                    # the warpgroups' loops in all, against the three parts' sum (the rest:
                    # the tail split's non-last arrivals after their partials, the last stores)
                    "wg_loop_us_sum": v[5] / 1e3,
                    "parts_us_sum": busy / 1e3,
                    # within the mainloop: waits for landed operands (the feed behind)
                    "full_wait_us_per_unit": v[6] / 1e3 / units,
                    # of it, in the unit's first kStages k-tiles (the refill across the boundary)
                    "full_wait_head_us_per_unit": v[8] / 1e3 / units,
                    # the TMA producer's waits for free stages, per unit of a CTA (the consumer
                    # warpgroups, 2 or 3 per CTA, each count a unit)
                    "producer_empty_wait_us_per_unit": v[7]
                    / 1e3
                    / (units / (3 if "m192" in name else 2)),
                }
                if v[10] > 0:  # the landing watcher (kernels without producer hooks)
                    loads = v[10]
                    row.update(
                        loads=loads,
                        # from the producer's issue to the stage's completion
                        load_latency_us=v[9] / 1e3 / loads,
                        loads_over_1us=v[11] / loads,
                        loads_over_2us=v[12] / loads,
                        loads_over_4us=v[13] / loads,
                        # the loads consumer warpgroup 1 was already waiting for when they landed
                        loads_waited=v[15] / loads,
                        waited_load_latency_us=v[14] / 1e3 / max(v[15], 1),
                    )
                rows.append(row)
                print(
                    f"{name:<24}{m:>7} {row['module']:<20} plain {row['plain_ms']:.3f} ms, probe "
                    f"{row['probe_ms']:.3f} ms | {units:.0f} units: mainloop "
                    f"{row['mainloop_us_per_unit']:.2f} us, prefetch wait "
                    f"{row['prefetch_wait_us_per_unit']:.2f} us, epilogue "
                    f"{row['epilogue_us_per_epilogue']:.2f} us ({100 * row['epilogue_share']:.1f}%"
                    " of the warpgroups' time); in the mainloop, waits for operands "
                    f"{row['full_wait_us_per_unit']:.2f} us ("
                    f"{row['full_wait_head_us_per_unit']:.2f} in its first stages); the producer's"
                    " waits for free stages "
                    f"{row['producer_empty_wait_us_per_unit']:.2f} us",
                    flush=True,
                )
                if "loads" in row:
                    print(
                        f"{'':<32}loads: {row['load_latency_us']:.2f} us from issue to landing;"
                        f" over 1 / 2 / 4 us: {100 * row['loads_over_1us']:.1f} / "
                        f"{100 * row['loads_over_2us']:.1f} / {100 * row['loads_over_4us']:.2f}%;"
                        f" waited for: {100 * row['loads_waited']:.1f}% of the loads, those took "
                        f"{row['waited_load_latency_us']:.2f} us",
                        flush=True,
                    )
    _dump(rows, args.json)


def _dump(rows: list, path: str | None) -> None:
    if path:
        with open(path, "w") as fh:
            json.dump(rows, fh, indent=1)


if __name__ == "__main__":
    main()
