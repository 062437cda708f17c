"""The open issues' speed bars read from benchmark JSON: one line per centre, the ratio each bar
names and whether it holds.

    python3 scripts/bars.py --pre bench_pre_attention.json [more ...] --ops bench_ops_fp8.json

* #4 (``benchmarks/pre_attention.py``): the BF16 op against the torch.compile chain, >= 1.15x at
  every centre (stretch: the bare cuBLAS GEMM); one line per file, so two runs read side by side.
* #5 (``benchmarks/ops_fp8.py``): the FP8 pre-attention >= 1.15x torch.compile and >= 1.0x the bare
  ``_scaled_mm``.
* #6: the FP8 out_proj >= 1.15x torch.compile; its fused quantization's cost, the single launch
  over the same kernel on quantized input (``h3_no_quant``: the two-launch form without its
  quantization launch), <= 5%; also that cost over the plain engine GEMM.
* #7: the MLP >= 1.15x torch.compile (stretch: its two bare ``_scaled_mm``).

Where a run also timed the other cluster size (``--other-cluster``), its ratio is printed beside
the default's. The bars are stated for the H200: the device line says which card ran.
"""

from __future__ import annotations

import argparse
import json


def _mark(ok: bool) -> str:
    return "ok" if ok else "MISSED"


def _device(doc: dict) -> str:
    dev = doc.get("device", {})
    return f"{dev.get('gpu', '?')}, {doc.get('date', '?')}"


def bf16_bars(doc: dict) -> list[str]:
    """Issue #4's lines from one pre_attention.py JSON."""
    lines, ok_all = [], True
    for r in doc["results"]:
        vs_c = r["compiled_ms"] / r["h3_ms"]
        ok_all &= vs_c >= 1.15
        lines.append(
            f"  P={r['P']} M={r['M']:>6}: {r['h3_ms']:.3f} ms, vs compile {vs_c:.3f}x "
            f"{_mark(vs_c >= 1.15)}, vs cuBLAS GEMM {r['gemm_ms'] / r['h3_ms']:.3f}x"
        )
    head = "over 1.15x at every centre" if ok_all else "MISSED at one centre or more"
    return [f"#4 BF16 pre-attention ({_device(doc)}): {head}", *lines]


def _other(r: dict, base: str) -> str:
    if "h3_other_cluster_ms" not in r:
        return ""
    return f" (other cluster {r[base] / r['h3_other_cluster_ms']:.3f}x)"


def fp8_bars(doc: dict) -> list[str]:
    """Issues #5-#7's lines from one ops_fp8.py JSON."""
    out = [f"FP8 ops ({_device(doc)})"]
    rows = {}
    for r in doc["results"]:
        rows.setdefault(r["op"], []).append(r)
    for r in rows.get("pre_attention", []):
        vs_c, vs_g = r["compiled_ms"] / r["h3_ms"], r["gemm_ms"] / r["h3_ms"]
        out.append(
            f"  #5 M={r['M']:>6}: vs compile {vs_c:.3f}x {_mark(vs_c >= 1.15)}, vs _scaled_mm "
            f"{vs_g:.3f}x{_other(r, 'gemm_ms')} {_mark(vs_g >= 1.0)}"
        )
    for r in rows.get("out_proj", []):
        vs_c = r["compiled_ms"] / r["h3_ms"]
        line = f"  #6 M={r['M']:>6}: vs compile {vs_c:.3f}x{_other(r, 'compiled_ms')} "
        line += _mark(vs_c >= 1.15)
        if "h3_no_quant_ms" in r:
            cost = r["h3_ms"] / r["h3_no_quant_ms"] - 1
            line += f"; fused quantization {100 * cost:.1f}% {_mark(cost <= 0.05)}"
            if "engine_ms" in r:
                line += f" ({100 * (r['h3_ms'] - r['h3_no_quant_ms']) / r['engine_ms']:.1f}%"
                line += " of the plain engine GEMM)"
        out.append(line)
    for r in rows.get("mlp", []):
        vs_c, vs_g = r["compiled_ms"] / r["h3_ms"], r["gemm_ms"] / r["h3_ms"]
        out.append(
            f"  #7 M={r['M']:>6}: vs compile {vs_c:.3f}x{_other(r, 'compiled_ms')} "
            f"{_mark(vs_c >= 1.15)}, vs its two _scaled_mm {vs_g:.3f}x"
        )
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pre", nargs="*", default=[], help="benchmarks/pre_attention.py JSON files")
    ap.add_argument("--ops", nargs="*", default=[], help="benchmarks/ops_fp8.py JSON files")
    args = ap.parse_args(argv)
    for path in args.pre:
        with open(path) as f:
            print("\n".join(bf16_bars(json.load(f))))
    for path in args.ops:
        with open(path) as f:
            print("\n".join(fp8_bars(json.load(f))))


if __name__ == "__main__":
    main()
