"""testing.bench_graphs's replay orders without a GPU: the balanced order times every form equally
often after each other form (the carryover under the power cap is then the same for every form),
and the shuffled order (before session 33) is the seeded rounds it always was."""

from __future__ import annotations

import random
from collections import Counter

import pytest

pytest.importorskip("cupy")

from h3cupy.testing import balanced_order, shuffled_order  # noqa: E402


@pytest.mark.parametrize("n", [1, 2, 3, 8, 9, 12])
@pytest.mark.parametrize("circuits", [1, 3])
def test_balanced_order_pairs(n, circuits):
    seq = balanced_order(n, circuits, seed=n)
    # element 0 only sets the first timed replay's predecessor
    timed = seq[1:]
    assert len(timed) == circuits * max(1, n * (n - 1))
    counts = Counter(timed)
    assert set(counts) == set(range(n))
    assert set(counts.values()) == {circuits * max(1, n - 1)}
    if n == 1:
        return
    pairs = Counter(zip(seq[:-1], seq[1:], strict=True))
    # every ordered pair of two different forms, circuits times; no form after itself
    assert set(pairs) == {(a, b) for a in range(n) for b in range(n) if a != b}
    assert set(pairs.values()) == {circuits}


def test_balanced_order_is_seeded():
    assert balanced_order(9, 2, seed=0) == balanced_order(9, 2, seed=0)
    assert balanced_order(9, 2, seed=0) != balanced_order(9, 2, seed=1)


def test_shuffled_order_is_the_former_rounds():
    n, reps = 9, 20
    seq = shuffled_order(n, reps)
    rng = random.Random(0)
    rounds = []
    for _ in range(reps):
        order = list(range(n))
        rng.shuffle(order)
        rounds.extend(order)
    assert seq == [rounds[-1], *rounds]
    # the imbalance session 33 found: with these nine forms and 20 rounds, form 1 (the BF16
    # benchmark's h3_no_tail) follows form 5 (eager) in 7 rounds, form 0 (h3) in 1
    pairs = Counter(zip(seq[1:-1], seq[2:], strict=True))
    assert pairs[5, 1] == 7 and pairs[5, 0] == 1
