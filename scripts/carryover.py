"""The carryover in a benchmark run: each form's median time after each predecessor, from the
``after_ms`` that benchmarks/pre_attention.py and ops_fp8.py write (testing.bench_graphs), as
ratios to the form's own median, and its balanced mean (the mean of those medians, the figure
scripts/bars.py sets beside the median); and, for pairs of forms that run the same kernel,
their ratio.

    python3 scripts/carryover.py run.json [more.json ...] [--same h3 h3_no_tail]
"""

from __future__ import annotations

import argparse
import json
import statistics

from bars import balanced_mean  # scripts/ is the script's directory


def table(row: dict, same: list[str]) -> list[str]:
    after = row.get("after_ms")
    if not after:
        return ["  (no after_ms: a run before session 33)"]
    forms = list(after)
    width = max(len(f) for f in forms)
    lines = [f"  order {row.get('order', '?')}; after each predecessor / own median:"]
    lines.append(" " * (width + 4) + "".join(f"{p[:9]:>10}" for p in forms))
    for f in forms:
        med = row[f"{f}_ms"]
        cells = "".join(
            f"{after[f][p] / med:>10.3f}" if p in after[f] else f"{'-':>10}" for p in forms
        )
        bal = balanced_mean(row, f)
        lines.append(f"  {f:<{width}}  {cells}   median {med:.3f} ms, balanced mean {bal:.3f} ms")
    # a predecessor's effect on everyone: the mean over the forms of (after it / own median)
    eff = {
        p: statistics.fmean(after[f][p] / row[f"{f}_ms"] for f in forms if p in after[f])
        for p in forms
    }
    lines.append(
        "  mean effect of each predecessor: "
        + ", ".join(f"{p} {v:.3f}" for p, v in sorted(eff.items(), key=lambda kv: kv[1]))
    )
    if len(same) == 2 and all(f"{s}_ms" in row for s in same):
        a, b = (row[f"{s}_ms"] for s in same)
        lines.append(f"  same kernel: {same[0]} / {same[1]} = {a / b:.4f}")
    return lines


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="+")
    ap.add_argument("--same", nargs=2, default=[], help="two forms that run the same kernel")
    args = ap.parse_args(argv)
    for path in args.files:
        with open(path) as f:
            doc = json.load(f)
        for row in doc["results"]:
            key = f"P={row['P']} " if "P" in row else f"{row.get('op', '?')} "
            print(f"{path}: {key}M={row['M']}")
            print("\n".join(table(row, args.same)))


if __name__ == "__main__":
    main()
