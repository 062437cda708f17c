"""Benchmark: the RMSNorm + AdaLN prologue (bf16 / FP8 / NVFP4 out) at production M.

Counts the bytes the op must move (x read, the gathered table rows read, outputs written; the
norm weight once) and reports the achieved rate against a device-to-device copy measured in the
same run, plus torch eager chains of the same math as the baseline a user would write.

    PYTHONPATH=. python3 benchmarks/prologue.py --json out.json
"""

from __future__ import annotations

import argparse
import datetime
import itertools
import json

import numpy as np

D = 5376


def copy_bandwidth(nbytes: int = 2 << 30) -> dict:
    import cupy

    from h3cupy.testing import bench

    src = cupy.empty(nbytes // 4, np.float32)
    src.fill(1.0)
    dst = cupy.empty_like(src)
    t = bench(lambda i: dst.__setitem__(Ellipsis, src), reps=20, warmup=3)
    return {
        "name": "copy_d2d_rw",
        "bytes": 2 * nbytes,
        **t,
        "gbps": 2 * nbytes / (t["median_ms"] * 1e-3) / 1e9,
    }


def bytes_moved(m: int, fmt: str) -> int:
    read = m * D * 2 * 3 + D * 2  # x + gathered scale and shift rows + norm weight
    write = {"bf16": m * D * 2, "fp8": m * D + 4 * m, "nvfp4": m * D // 2 + m * D // 16}[fmt]
    return read + write


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--m", type=int, nargs="+", default=[38592, 4824])
    ap.add_argument("--rows", type=int, default=9)
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument(
        "--ctas",
        type=int,
        nargs="+",
        default=None,
        help="prologue.CTAS_PER_SM values to time (default: the library's per-target choice)",
    )
    ap.add_argument("--json", default=None)
    ap.add_argument("--no-torch", action="store_true")
    args = ap.parse_args()

    import cupy

    from h3cupy.formats import BF16
    from h3cupy.ops import prologue
    from h3cupy.ops.prologue import norm_adaln
    from h3cupy.reference import inputs
    from h3cupy.testing import bench, bench_cupy_graph, device_info, upload

    info = device_info()
    copy = copy_bandwidth()
    results = [copy]
    rng = np.random.default_rng(0)
    print(f"{info['gpu']} ({info['target']}), copy {copy['gbps']:.0f} GB/s (read+write)")
    print(
        f"{'op':<28}{'M':>7}{'ms':>9}{'GB/s':>8}{'% copy':>8}{'vs torch':>10}{'graph ms':>10}"
        f"{'% copy':>9}"
    )
    for m in args.m:
        sets = []
        for _ in range(2):  # two input sets, each well beyond the 60 MB L2
            h = inputs.prologue_inputs(m, rows=args.rows, k=D, index_dtype=np.int64, rng=rng)
            sets.append({k: upload(v) for k, v in h.items()})
        g = cupy.asarray(np.array([336.0], np.float32))
        outs = {
            "bf16": dict(a=cupy.empty((m, D), BF16)),
            "fp8": dict(q=cupy.empty((m, D), np.uint8), scale=cupy.empty((m,), np.float32)),
            "nvfp4": dict(
                q=cupy.empty((m, D // 2), np.uint8), scale=cupy.empty((m, D // 16), np.uint8)
            ),
        }
        torch_ms = torch_baselines(sets, m) if not args.no_torch else {}
        for ctas_set, fmt in itertools.product(args.ctas or [None], ("bf16", "fp8", "nvfp4")):
            prologue.CTAS_PER_SM = ctas_set
            ctas = prologue.ctas_per_sm(info["target"])

            def run(i, fmt=fmt, sets=sets, g=g, outs=outs):
                s = sets[i]
                norm_adaln(
                    s["x"],
                    s["x_norm_weight"],
                    s["adaln_scale"],
                    s["adaln_shift"],
                    s["adaln_index"],
                    out_format=fmt,
                    act_global_scale=g if fmt == "nvfp4" else None,
                    **outs[fmt],
                )

            t = bench(run, reps=args.reps, warmup=3, rotate=2)
            tg = bench_cupy_graph(run, calls=20, reps=5, rotate=2)
            nb = bytes_moved(m, fmt)
            gbps = nb / (t["median_ms"] * 1e-3) / 1e9
            base = torch_ms.get(fmt)
            row = {
                "name": f"prologue_{fmt}",
                "ctas_per_sm": ctas,
                "M": m,
                "rows": args.rows,
                "bytes": nb,
                **t,
                "gbps": gbps,
                "frac_of_copy": gbps / copy["gbps"],
                "torch_eager_ms": base,
                "speedup_vs_torch": (base / t["median_ms"]) if base else None,
                "graph_ms": tg["median_ms"],
                "graph_frac_of_copy": nb / (tg["median_ms"] * 1e-3) / 1e9 / copy["gbps"],
            }
            results.append(row)
            sp = f"{row['speedup_vs_torch']:.2f}x" if base else "-"
            print(
                f"{f'prologue {fmt} ({ctas}/SM)':<28}{m:>7}{t['median_ms']:>9.3f}{gbps:>8.0f}"
                f"{100 * gbps / copy['gbps']:>7.1f}%{sp:>10}{tg['median_ms']:>10.3f}"
                f"{100 * row['graph_frac_of_copy']:>8.1f}%"
            )
        del sets, outs
        cupy.get_default_memory_pool().free_all_blocks()
    doc = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "device": info,
        "results": results,
    }
    if args.json:
        with open(args.json, "w") as f:
            json.dump(doc, f, indent=1)


def torch_baselines(sets, m: int) -> dict[str, float]:
    """torch eager chains of the same math (what a user would write without h3cupy)."""
    try:
        import torch
    except ImportError:
        return {}
    import cupy

    from h3cupy.testing import bench

    tsets = []
    for s in sets:
        t = {}
        for k, v in s.items():
            if v.dtype.itemsize == 2:
                t[k] = torch.from_dlpack(v.view(cupy.int16)).view(torch.bfloat16)
            else:
                t[k] = torch.from_dlpack(v)
        tsets.append(t)
    rows = tsets[0]["adaln_scale"].shape[0]

    def prologue(t):
        x = t["x"]
        n = torch.nn.functional.rms_norm(x, (D,), t["x_norm_weight"], 1e-5)
        idx = t["adaln_index"]
        valid = (idx >= 0) & (idx < rows)
        safe = torch.where(valid, idx, torch.zeros_like(idx))
        s1 = (t["adaln_scale"] + 1)[safe]
        a = torch.addcmul(t["adaln_shift"][safe], n, s1)
        return a * valid[:, None]

    def fp8(t):
        a = prologue(t).float()
        s = a.abs().amax(dim=1, keepdim=True).clamp_min(1e-12) / 448.0
        return (a / s).clamp(-448, 448).to(torch.float8_e4m3fn), s

    out = {}
    for fmt, fn in (("bf16", prologue), ("fp8", fp8)):
        r = bench(lambda i, fn=fn: fn(tsets[i]), reps=10, warmup=2, rotate=2)
        out[fmt] = r["median_ms"]
    return out


if __name__ == "__main__":
    main()
