"""GPU (sm_90+): one TMA tile load through a driver-encoded tensor map and an mbarrier, against
NumPy slicing — inside the matrix and across its edges (the TMA unit fills zeros there)."""

from __future__ import annotations

import numpy as np
import pytest

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize(("x0", "y0"), [(0, 0), (64, 40), (960, 90), (-16, -8)])
def test_tma_box(x0, y0, rng):
    import cupy

    from h3cupy.core import arch
    from h3cupy.ops.gemm import tma_probe

    if arch.sm_number(arch.current_target()) < 90:
        pytest.skip("TMA needs sm_90+")
    rows, cols, br, bc = 100, 1008, 32, 64  # TMA: 16-byte multiple row stride
    m = rng.integers(1, 256, (rows, cols), dtype=np.uint8)  # never zero: zeros mean "past edge"
    got = cupy.asnumpy(tma_probe(cupy.asarray(m), x0, y0, bc, br))
    want = np.zeros((br, bc), np.uint8)
    r0, c0 = max(y0, 0), max(x0, 0)
    r1, c1 = min(y0 + br, rows), min(x0 + bc, cols)
    want[r0 - y0 : r1 - y0, c0 - x0 : c1 - x0] = m[r0:r1, c0:c1]
    assert np.array_equal(got, want)
