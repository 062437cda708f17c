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

Each line of #4, #5, #7 (and of #6 where the run timed the bare GEMM) ends with the matrix rate
the bar asks of the op: its GEMMs' FLOPs over the longest time that still holds every bar of the
line, as a fraction of the H200's measured ceiling (bf16 ~780, FP8 ~1400 TFLOP/s: the brief's
figures), beside the rate the bare GEMM(s) of the same run reached. The op does more than its
GEMMs (the prologue, the epilogue's math), so a bar that asks more than the bare GEMM's rate asks
the fused op to outrun cuBLAS at its own work.

Where a run also timed the other cluster size (``--other-cluster``), its ratio is printed beside
the default's. The bars are stated for the H200: the device line says which card ran.

Each ratio is of the forms' medians. Where the run recorded each form's median after each
predecessor (``after_ms``: the balanced replay order, since session 33), the ratio of the
balanced means (each form's mean over its predecessors of those medians) is printed beside it,
and a bar holds only if it holds by both: under the power cap a replay after a light
(memory-bound) form runs ~10% faster than after a GEMM, so a form's times are bimodal and its
median can sit in either mode from run to run (session 33: the torch.compile chain at M = 38592
read 13.08-14.95 ms as medians, 13.9-14.7 ms as balanced means, in six runs on one H200).
"""

from __future__ import annotations

import argparse
import json

#: GEMM FLOPs per token of each op at the H3 shapes (SPEC.md §1): QKV 5376 -> 21504, O 7168 ->
#: 5376, FC1 5376 -> 28672 then FC2 14336 -> 5376.
FLOP_PER_TOKEN = {
    "pre_attention": 2 * 5376 * 21504,
    "out_proj": 2 * 7168 * 5376,
    "mlp": 2 * 5376 * 28672 + 2 * 14336 * 5376,
}
#: The H200's measured matrix ceilings, TFLOP/s (dense, random data; the developers' brief).
CEILING_TFLOPS = {"bf16": 780.0, "e4m3": 1400.0}


def rate_asked(op: str, fmt: str, m: int, allowed_ms: float, gemm_ms: float) -> str:
    """`` [asks N TFLOP/s, P% of the ceiling; the bare GEMM ran at Q%]``: the rate at which the op's
    GEMMs must run for the op to finish in ``allowed_ms``, against the bare GEMM's."""
    flop, ceil = FLOP_PER_TOKEN[op] * m, CEILING_TFLOPS[fmt]
    asked, ran = flop / allowed_ms * 1e-9, flop / gemm_ms * 1e-9
    return (
        f" [asks {asked:.0f} TFLOP/s, {100 * asked / ceil:.0f}% of the H200's ceiling;"
        f" the bare GEMM ran at {100 * ran / ceil:.0f}%]"
    )


def _mark(ok: bool) -> str:
    return "ok" if ok else "MISSED"


def _device(doc: dict) -> str:
    dev = doc.get("device", {})
    return f"{dev.get('gpu', '?')}, {doc.get('date', '?')}"


def balanced_mean(r: dict, form: str) -> float | None:
    """The form's balanced mean: its mean over predecessors of its median after each (None
    without ``after_ms``). scripts/carryover.py prints the same figure."""
    after = r.get("after_ms", {}).get(form)
    return sum(after.values()) / len(after) if after else None


def _ratio(r: dict, base: str, ours: str = "h3") -> tuple[float, float | None]:
    """(base / ours of the medians, of the balanced means or None)."""
    b, o = balanced_mean(r, base), balanced_mean(r, ours)
    return r[f"{base}_ms"] / r[f"{ours}_ms"], (b / o if b and o else None)


def _fmt(ratios: tuple[float, float | None]) -> str:
    med, bal = ratios
    return f"{med:.3f}x" + (f" (balanced {bal:.3f}x)" if bal is not None else "")


def _low(ratios: tuple[float, float | None]) -> float:
    """The smaller of the two ratios: a bar holds only if both statistics hold it."""
    return min(x for x in ratios if x is not None)


def _asks(r: dict, bar: float) -> str:
    """What a bar of ``bar`` x the torch.compile chain asks of the op against the bare GEMM(s)
    of the same run (medians): ``bar * gemm / compiled``, e.g. 1.02x where the chain is only
    1.13x slower than the GEMM alone."""
    return f" (the bar asks {bar * r['gemm_ms'] / r['compiled_ms']:.3f}x)"


def bf16_bars(doc: dict) -> list[str]:
    """Issue #4's lines from one pre_attention.py JSON."""
    lines, ok_all = [], True
    for r in doc["results"]:
        vs_c = _ratio(r, "compiled")
        ok_all &= _low(vs_c) >= 1.15
        lines.append(
            f"  P={r['P']} M={r['M']:>6}: {r['h3_ms']:.3f} ms, vs compile {_fmt(vs_c)} "
            f"{_mark(_low(vs_c) >= 1.15)}, vs cuBLAS GEMM {_fmt(_ratio(r, 'gemm'))}"
            f"{_asks(r, 1.15)}"
            f"{rate_asked('pre_attention', 'bf16', r['M'], r['compiled_ms'] / 1.15, r['gemm_ms'])}"
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
        vs_c, vs_g = _ratio(r, "compiled"), _ratio(r, "gemm")
        out.append(
            f"  #5 M={r['M']:>6}: vs compile {_fmt(vs_c)} {_mark(_low(vs_c) >= 1.15)}, vs "
            f"_scaled_mm {_fmt(vs_g)}{_other(r, 'gemm_ms')} {_mark(_low(vs_g) >= 1.0)}"
            + rate_asked(
                "pre_attention",
                "e4m3",
                r["M"],
                min(r["compiled_ms"] / 1.15, r["gemm_ms"]),
                r["gemm_ms"],
            )
        )
    for r in rows.get("out_proj", []):
        vs_c = _ratio(r, "compiled")
        line = f"  #6 M={r['M']:>6}: vs compile {_fmt(vs_c)}{_other(r, 'compiled_ms')} "
        line += _mark(_low(vs_c) >= 1.15)
        if "h3_no_quant_ms" in r:
            nq = _ratio(r, "h3", "h3_no_quant")
            cost = max(x for x in nq if x is not None) - 1
            line += f"; fused quantization {100 * (nq[0] - 1):.1f}%"
            if nq[1] is not None:
                line += f" (balanced {100 * (nq[1] - 1):.1f}%)"
            line += f" {_mark(cost <= 0.05)}"
            if "engine_ms" in r:
                line += f" ({100 * (r['h3_ms'] - r['h3_no_quant_ms']) / r['engine_ms']:.1f}%"
                line += " of the plain engine GEMM)"
        if "gemm_ms" in r:
            line += rate_asked("out_proj", "e4m3", r["M"], r["compiled_ms"] / 1.15, r["gemm_ms"])
        out.append(line)
    for r in rows.get("mlp", []):
        vs_c, vs_g = _ratio(r, "compiled"), _ratio(r, "gemm")
        out.append(
            f"  #7 M={r['M']:>6}: vs compile {_fmt(vs_c)}{_other(r, 'compiled_ms')} "
            f"{_mark(_low(vs_c) >= 1.15)}, vs its two _scaled_mm {_fmt(vs_g)}{_asks(r, 1.15)}"
            + rate_asked("mlp", "e4m3", r["M"], r["compiled_ms"] / 1.15, r["gemm_ms"])
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
