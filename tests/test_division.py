"""CPU: the FC1 epilogue's branch-free division (cuda_src/include/h3/quant.cuh div_rn_ge1) in exact
rational arithmetic: with the hardware reciprocal anywhere within 1 ulp of 1/b (the model of
rcp.approx), one Newton step and Markstein's correction give the correctly rounded quotient for
b = 1 + exp(-g) and bf16 values of g in the range the kernel takes the fast path. The GPU test
(tests/test_mlp_gpu.py::test_swiglu_division_exhaustive) checks the real instruction against
__fdiv_rn for every bf16 g."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from h3cupy import formats


def _rn32(x: Fraction) -> float:
    """x rounded to the nearest float32, ties to even (exact: neighbours compared as rationals)."""
    if x == 0:
        return 0.0
    c = np.float32(float(x))
    cands = (np.nextafter(c, np.float32(-np.inf)), c, np.nextafter(c, np.float32(np.inf)))

    def key(v):
        return abs(Fraction(float(v)) - x), int(np.float32(v).view(np.uint32)) & 1

    return float(min(cands, key=key))


def _fma(a: float, b: float, c: float) -> float:
    return _rn32(Fraction(a) * Fraction(b) + Fraction(c))


def test_div_rn_ge1_model(rng):
    g = np.concatenate([rng.normal(0, 3, 2000), rng.uniform(-69, 20, 2000)]).astype(np.float32)
    g = formats.to_bf16(g).astype(np.float32)
    checked = 0
    for gv in g.tolist():
        b = float(np.float32(1) + np.exp(np.float32(-gv)))
        want = _rn32(Fraction(gv) / Fraction(b))
        y_rn = np.float32(_rn32(1 / Fraction(b)))
        for y0 in (np.nextafter(y_rn, np.float32(0)), y_rn, np.nextafter(y_rn, np.float32(2))):
            y0 = float(y0)
            y = _fma(y0, _fma(-b, y0, 1.0), y0)
            q0 = _rn32(Fraction(gv) * Fraction(y))
            q = math.copysign(_fma(_fma(-b, q0, gv), y, q0), gv)
            assert q == want, (gv, b, y0, q, want)
            checked += 1
    assert checked == 3 * g.size
