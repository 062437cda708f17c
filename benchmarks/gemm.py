"""Benchmark: the GEMM engine at the H3 shapes against cuBLAS in the same run.

Shapes (K x N): QKV 5376 x 21504, O 7168 x 5376, FC1 5376 x 28672, FC2 14336 x 5376; M from
--m. Baselines: ``torch.mm`` (bf16, cuBLAS) and ``torch._scaled_mm`` with row-wise scales (FP8).
Inputs rotate over enough sets to exceed the 60 MB L2; CUDA events, median.

    PYTHONPATH=. python3 benchmarks/gemm.py --json out.json [--m 4824 38592] [--fmt bf16 e4m3]
"""

from __future__ import annotations

import argparse
import datetime
import functools
import json

import numpy as np

SHAPES = {"qkv": (5376, 21504), "o": (7168, 5376), "fc1": (5376, 28672), "fc2": (14336, 5376)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--m", type=int, nargs="+", default=[1, 129, 4824, 38592])
    ap.add_argument("--fmt", nargs="+", default=["bf16", "e4m3"])
    ap.add_argument("--shapes", nargs="+", default=list(SHAPES))
    ap.add_argument("--backend", nargs="+", default=["mma_sync", "wgmma"])
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--json", default=None)
    ap.add_argument(
        "--energy",
        action="store_true",
        help="also replay each form back to back for 1 s windows (twice) sampling NVML: "
        "sustained time, mean SM clock, clock cycles, power and energy per call",
    )
    args = ap.parse_args()

    import cupy
    import torch

    from h3cupy.ops import gemm
    from h3cupy.testing import bench, bench_graphs, device_info

    info = device_info()
    results = []
    print(f"{info['gpu']} ({info['target']})")
    workspaces: dict = {}

    def swapab(a, b, fmt, out):
        """The swap-AB small-M path (bf16, M <= 136) with its split-K workspace allocated once
        per shape, outside the timed region after the first call."""
        m, k = a.shape
        n = b.shape[0]
        s = gemm.small_m_splits(m, n, k, info["sms"])
        if (m, n, k) not in workspaces:
            workspaces[m, n, k] = torch.empty(s * m * n, device="cuda")
        gemm.gemm_wgmma_small_m(a, b, out=out, splits=s, workspace=workspaces[m, n, k])

    def wgmma_notail(*a, **kw):
        """gemm_wgmma with the tail split off (gemm.TAIL_SPLIT), for the A/B in one run."""
        old, gemm.TAIL_SPLIT = gemm.TAIL_SPLIT, False
        try:
            return gemm.gemm_wgmma(*a, **kw)
        finally:
            gemm.TAIL_SPLIT = old

    backends = {
        "mma_sync": gemm.gemm_mma_sync,
        "wgmma": gemm.gemm_wgmma,
        "wgmma_notail": wgmma_notail,
        "mma_tma": gemm.gemm_mma_tma,
        "mma_tma_t0": functools.partial(gemm.gemm_mma_tma, ws=False),
        # the plan sm_120 boards run (64-byte k-tiles, 4 stages, 99 KiB), on this GPU
        "mma_tma_sm120": functools.partial(gemm.gemm_mma_tma, sm120_plan=True),
        "swapab": swapab,
    }

    # wgmma<tile N>[p|p3|p4][x2][pp]: p = FP8 promotion per k-tile, p3 / p4 = per two / four
    # k-tiles, x2 = clusters of two CTAs, pp = ping-pong.
    def vname(tile_n, promote, cluster, pingpong):
        x2 = f"x{cluster}" if cluster > 1 else ""
        p = "" if not promote else "p" + (str(promote) if promote > 1 else "")
        return f"wgmma{tile_n}{p}{x2}{'pp' if pingpong else ''}"

    for _fmt, tile_n, promote, cluster, pingpong in gemm.WGMMA_VARIANTS:
        backends.setdefault(
            vname(tile_n, promote, cluster, pingpong),
            functools.partial(
                gemm.gemm_wgmma,
                tile_n=tile_n,
                promote=promote,
                cluster=cluster,
                pingpong=pingpong,
            ),
        )
    valid = {f"{vname(*v[1:])}:{v[0]}" for v in gemm.WGMMA_VARIANTS}
    # wgmma192m192[x2]: the benchmark-only 192 x 192 bf16 tiles on three consumer warpgroups
    for c in gemm.WGMMA_M192_CLUSTERS:
        b = f"wgmma192m192{'x2' if c > 1 else ''}"
        backends[b] = functools.partial(gemm.gemm_wgmma, tile_m=192, cluster=c)
        valid.add(f"{b}:bf16")
    if info["target"] != "sm_90a":
        args.backend = [b for b in args.backend if not b.startswith("wgmma")]
    print(
        f"{'shape':<6}{'fmt':<6}{'backend':<9}{'M':>7}{'h3 ms':>9}{'TFLOP/s':>9}{'base ms':>9}"
        f"{'ratio':>7}{'graph h3':>10}{'graph base':>11}{'g-ratio':>8}"
    )
    for name in args.shapes:
        k, n = SHAPES[name]
        for m in args.m:
            flops = 2.0 * m * n * k
            for fmt in args.fmt:
                rot = max(1, int(np.ceil(3 * 60e6 / ((m + n) * k * (2 if fmt == "bf16" else 1)))))
                rot = min(rot, 8)
                ta = [torch.randn(m, k, device="cuda").mul_(0.5) for _ in range(rot)]
                tb = [torch.randn(n, k, device="cuda").mul_(0.01) for _ in range(rot)]
                out = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
                if fmt == "bf16":
                    ta = [t.bfloat16() for t in ta]
                    tb = [t.bfloat16() for t in tb]

                    def h3(i, fn, ta=ta, tb=tb, out=out):
                        fn(ta[i], tb[i], fmt="bf16", out=out)

                    def base(i, ta=ta, tb=tb):
                        torch.mm(ta[i], tb[i].t())
                else:
                    sa = [t.abs().amax(1, keepdim=True).clamp_min(1e-12) / 448 for t in ta]
                    sb = [t.abs().amax(1, keepdim=True).clamp_min(1e-12) / 448 for t in tb]
                    ta = [(t / s).to(torch.float8_e4m3fn) for t, s in zip(ta, sa, strict=True)]
                    tb = [(t / s).to(torch.float8_e4m3fn) for t, s in zip(tb, sb, strict=True)]
                    rs = [s.reshape(-1).contiguous() for s in sa]
                    cs = [s.reshape(-1).contiguous() for s in sb]

                    def h3(i, fn, ta=ta, tb=tb, rs=rs, cs=cs, out=out):
                        fn(ta[i], tb[i], fmt="e4m3", row_scale=rs[i], col_scale=cs[i], out=out)

                    def base(i, ta=ta, tb=tb, sa=sa, sb=sb):
                        torch._scaled_mm(
                            ta[i],
                            tb[i].t(),
                            scale_a=sa[i],
                            scale_b=sb[i].t(),
                            out_dtype=torch.bfloat16,
                        )

                names = [
                    b
                    for b in args.backend
                    if (b in ("wgmma", "wgmma_notail") or not b.startswith("wgmma"))
                    or f"{b}:{fmt}" in valid
                ]
                names = [b for b in names if b != "swapab" or (fmt == "bf16" and m <= 136)]
                calls = {b: (lambda i, fn=backends[b], h3=h3: h3(i, fn)) for b in names}
                # GPU times: CUDA-graph replays, baseline and back ends interleaved.
                g = bench_graphs(
                    {"base": base, **calls}, reps=args.reps, rotate=rot, energy=args.energy
                )
                g_base = g["base"]
                # Eager times (host launch path included): the baseline and each back end.
                t_base = bench(base, reps=args.reps, warmup=3, rotate=rot)
                for bname in names:
                    t_h3 = bench(calls[bname], reps=args.reps, warmup=3, rotate=rot)
                    g_h3 = g[bname]
                    row = {
                        "shape": name,
                        "fmt": fmt,
                        "M": m,
                        "K": k,
                        "N": n,
                        "backend": bname,
                        "h3_ms": t_h3["median_ms"],
                        "base_ms": t_base["median_ms"],
                        "tflops": flops / (t_h3["median_ms"] * 1e-3) / 1e12,
                        "base_tflops": flops / (t_base["median_ms"] * 1e-3) / 1e12,
                        "ratio_vs_base": t_base["median_ms"] / t_h3["median_ms"],
                        "graph_h3_ms": g_h3["median_ms"],
                        "graph_base_ms": g_base["median_ms"],
                        "graph_ratio": g_base["median_ms"] / g_h3["median_ms"],
                        "graph_tflops": flops / (g_h3["median_ms"] * 1e-3) / 1e12,
                    }
                    for key in ("sustained_ms", "clock_mhz", "mcycles", "power_w", "energy_mj"):
                        if key in g_h3:
                            row[f"h3_{key}"] = g_h3[key]
                        if key in g_base:
                            row[f"base_{key}"] = g_base[key]
                    results.append(row)
                    print(
                        f"{name:<6}{fmt:<6}{bname:<9}{m:>7}{row['h3_ms']:>9.3f}"
                        f"{row['tflops']:>9.1f}{row['base_ms']:>9.3f}"
                        f"{row['ratio_vs_base']:>7.2f}{row['graph_h3_ms']:>10.3f}"
                        f"{row['graph_base_ms']:>11.3f}{row['graph_ratio']:>8.2f}"
                    )
                    if "h3_mcycles" in row and "base_mcycles" in row:
                        print(
                            f"   sustained: h3 {row['h3_sustained_ms']:.3f} ms at "
                            f"{row['h3_clock_mhz']:.0f} MHz, {row['h3_power_w']:.0f} W, "
                            f"{row['h3_mcycles']:.3f} Mcycles, {row['h3_energy_mj']:.1f} mJ; "
                            f"base {row['base_sustained_ms']:.3f} ms at "
                            f"{row['base_clock_mhz']:.0f} MHz, {row['base_power_w']:.0f} W, "
                            f"{row['base_mcycles']:.3f} Mcycles, {row['base_energy_mj']:.1f} mJ"
                        )
                del ta, tb, out
                torch.cuda.empty_cache()
                cupy.get_default_memory_pool().free_all_blocks()
    from h3cupy.core import launch

    clusters = sorted(set(launch._active_clusters.values()))
    print(f"resident clusters (cuOccupancyMaxActiveClusters): {clusters}")
    doc = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "device": info,
        "torch": torch.__version__,
        "max_active_clusters": clusters,
        "results": results,
    }
    if args.json:
        with open(args.json, "w") as f:
            json.dump(doc, f, indent=1)


if __name__ == "__main__":
    main()
