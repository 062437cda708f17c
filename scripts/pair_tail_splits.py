"""The FP8 pre-attention's pairs' tail split by its split count (a diagnostic, not a test).

Session 35 counted the n192 pairs' last round at M = 4824 (16 of 2128 pairs on 16 of 132 CTAs)
at ~3.7% of the op, and the pairs' tail split (``pre_attention.FP8_PAIR_TAIL_SPLIT``, two
launches) should shorten it to a fraction of a pair; it measured level or slower. This times, in
one run of CUDA-graph replays (``testing.bench_graphs``, balanced order), the two launches
without the split against the split with at most 2, 4 and 8 k-ranges per leftover pair
(``gemm.TAIL_MAX_SPLITS``; the split count is min(that, 132 // leftover pairs, k-tiles / 4)),
and the single-launch default, at M where the split engages (4824: 16 leftover pairs, 9648: 32)
and one where it does not (4736: 92 leftover, no split). If the time falls with more ranges, the
split works and something fixed costs; if it stays flat, the last round is not what the split
units decide.

Session 36 adds ``tail_kernel``: the two launches with the tail-split kernel and one k-range per
pair (``pre_attention.FP8_PAIR_TAIL_KERNEL``; no split, the plain kernel's sums). Against
``two_launches`` it is the tail kernel's own cost; the split forms against ``tail_kernel`` are the
split's. Before timing, its q / k / v bytes are compared with the two launches' (they must be
equal: the same sums and epilogue), and the verdict is printed and recorded.

    PYTHONPATH=. python3 scripts/pair_tail_splits.py [--m 4736 4824 9648] [--json out.json]
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--m", type=int, nargs="+", default=[4736, 4824, 9648])
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()

    import numpy as np
    from ops_fp8 import forms, with_setting

    from h3cupy.ops import gemm, pre_attention
    from h3cupy.testing import bench_graphs, device_info, poisoned_bf16_run

    rows = []
    for m in args.m:
        fns = forms("pre_attention", m)[0]
        sel = {"single_launch": fns["h3"], "two_launches": fns["h3_prologue_launch"]}
        sel["tail_kernel"] = with_setting(pre_attention, "FP8_PAIR_TAIL_KERNEL", True, fns["h3"])
        # each form on poisoned outputs (0xFF bytes): it must write every element itself
        ref, ok_ref = poisoned_bf16_run(partial(sel["two_launches"], 0), fns["h3"].outs)
        got, ok_got = poisoned_bf16_run(partial(sel["tail_kernel"], 0), fns["h3"].outs)
        same = ok_ref and ok_got and all(map(np.array_equal, ref, got))
        print(f"M={m:>6}: the tail kernel with one range gives the two launches' bytes: {same}")
        for s in (2, 4, 8):
            sel[f"split_max{s}"] = with_setting(gemm, "TAIL_MAX_SPLITS", s, fns["h3_pair_tail"])
        t = bench_graphs(sel, reps=args.reps)
        row = {"M": m, "tail_kernel_same_bytes": same}
        row.update({f"{k}_ms": v["median_ms"] for k, v in t.items()})
        row["after_ms"] = {k: v["after_ms"] for k, v in t.items()}
        rows.append(row)
        print(
            f"M={m:>6}: " + ", ".join(f"{k} {v['median_ms']:.4f} ms" for k, v in t.items()),
            flush=True,
        )
    if args.json:
        with open(args.json, "w") as f:
            date = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
            json.dump({"date": date, "device": device_info(), "results": rows}, f, indent=1)


if __name__ == "__main__":
    main()
