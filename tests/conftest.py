from __future__ import annotations

import os

import numpy as np
import pytest

from h3cupy.testing import gpu_available

_HAS_GPU = gpu_available()


def pytest_collection_modifyitems(config, items):
    if _HAS_GPU:
        return
    skip = pytest.mark.skip(reason="no CUDA GPU on this machine (GPU tests run in the GPU round)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def rng(request):
    """A fresh generator per test; the seed is printed on failure so a case can be replayed
    (H3CUPY_TEST_SEED=<seed>)."""
    seed = int(os.environ.get("H3CUPY_TEST_SEED") or np.random.SeedSequence().entropy % 2**32)
    request.node.user_properties.append(("seed", seed))
    print(f"seed={seed}")
    return np.random.default_rng(seed)
