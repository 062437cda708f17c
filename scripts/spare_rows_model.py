"""When the single-launch kernels' spare rows are needed, against when they can be ready (a model
on the CPU, no GPU): a replay of the engine's grouped tile order (h3/gemm_sm90.cuh, TileOrder,
with -DH3_FIRST_GROUP_M's first group) for one kernel shape.

The first round's rows (the M-tiles that the grid's first `units` tiles read) are written by the
consumer warps before any tile starts; every later row by the spare workers, in increasing order
(worker w of W takes rows r0 + w, r0 + w + W, ...), one row each per ``--row-us``. A tile's rows
are needed when the first unit that reads them starts: at round ``unit / units`` of
``--round-us``. The model prints the first round's rows and the smallest slack (need - ready)
over the M-tiles: negative means the spare workers fall behind and tiles wait.

    python3 scripts/spare_rows_model.py --op out_proj --m 4824 --g0 5 --group 2
    python3 scripts/spare_rows_model.py --op pre_attention --m 4824 38592

Shapes (``--op``): out_proj (the FP8 out_proj's 128 x 192 single CTAs, 28 column tiles, 132
workers of three warps, ~6.7 us a row and ~36.5 us a round at M = 4824: session 22's probes) and
pre_attention (the BF16 pre-attention's 128 x 256 tiles in pairs, 84 column tiles, 66 clusters,
396 one-warp workers, ~20 us a row (session 23's estimate) and ~60 us a round).
"""

from __future__ import annotations

import argparse
import math

#: op -> (column tiles, units per round, rows per unit (M-tile pair or tile), workers, row us,
#: round us, default group)
SHAPES = {
    "out_proj": (28, 132, 128, 132, 6.7, 36.5, 8),
    "pre_attention": (84, 66, 256, 396, 20.0, 60.0, 8),
}


def first_unit_rounds(num_m: int, num_n: int, units: int, g0: int, group: int) -> dict[int, float]:
    """{M-tile (pair) index: the round at which the first unit reading it starts}."""
    g0 = min(num_m, g0)

    def m_of(t: int) -> int:
        if t < g0 * num_n:
            return t % g0
        t2 = t - g0 * num_n
        first = g0 + (t2 // (group * num_n)) * group
        gm = min(num_m - first, group)
        return first + (t2 - (first - g0) * num_n) % gm

    need: dict[int, float] = {}
    for t in range(num_m * num_n):
        need.setdefault(m_of(t), t / units)
    return need


def model(op: str, m: int, g0: int, group: int, row_us: float, round_us: float) -> dict:
    num_n, units, rows_per, workers, _, _, _ = SHAPES[op]
    num_m = math.ceil(m / rows_per)
    need = first_unit_rounds(num_m, num_n, units, g0, group)
    first = [mt for mt, rd in need.items() if rd < 1.0]
    r0 = min(m, (max(first) + 1) * rows_per)
    slack, late = math.inf, []
    for mt, rd in sorted(need.items()):
        last = min(m, rows_per * (mt + 1)) - 1
        if last < r0:
            continue
        ready = ((last - r0) // workers + 1) * row_us
        s = rd * round_us - ready
        slack = min(slack, s)
        if s < 0:
            late.append(mt)
    return {"r0": r0, "min_slack_us": slack, "late_tiles": late}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--op", choices=sorted(SHAPES), default="out_proj")
    ap.add_argument("--m", type=int, nargs="+", default=[4824])
    ap.add_argument(
        "--g0", type=int, nargs="+", default=[0], help="first group's M-tiles (0: as the rest)"
    )
    ap.add_argument("--group", type=int, nargs="+", default=None)
    ap.add_argument("--row-us", type=float, default=None)
    ap.add_argument("--round-us", type=float, default=None)
    args = ap.parse_args()
    *_, row_us, round_us, group0 = SHAPES[args.op]
    row_us = args.row_us or row_us
    round_us = args.round_us or round_us
    for m in args.m:
        for g0 in args.g0:
            for group in args.group or [group0]:
                r = model(args.op, m, g0 or group, group, row_us, round_us)
                late = r["late_tiles"]
                print(
                    f"{args.op} M = {m}: first group {g0 or group}, groups of {group}: "
                    f"first round {r['r0']} rows, smallest slack {r['min_slack_us']:.1f} us"
                    + (f", {len(late)} tiles late (first {late[:4]})" if late else "")
                )


if __name__ == "__main__":
    main()
