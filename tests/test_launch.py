"""CPU: the launch path's argument check (h3cupy.core.launch.check_params) refuses packed
arguments whose count or byte sizes differ from the kernel's parameter list."""

from __future__ import annotations

import numpy as np
import pytest

from h3cupy.core import launch


class _FakeKernel:
    name = "h3::fake_kernel"


def test_check_params_refuses_a_mismatch(monkeypatch):
    k = _FakeKernel()
    # a 128-byte tensor map, a pointer, an int, a float
    monkeypatch.setattr(launch, "kernel_param_sizes", lambda kernel: (128, 8, 4, 4))
    desc = np.zeros((), [("b", np.uint8, (128,))])
    good = [launch._param(v) for v in (desc, launch.ptr(None), launch.i32(3), launch.f32(1.0))]
    launch.check_params(k, good)  # no error
    for bad_args in (
        (desc, launch.ptr(None), launch.i32(3)),  # one argument short
        (desc, launch.ptr(None), launch.i64(3), launch.f32(1.0)),  # int64 where int32 is declared
        (launch.ptr(None), desc, launch.i32(3), launch.f32(1.0)),  # order swapped
    ):
        with pytest.raises(RuntimeError, match=r"h3::fake_kernel takes 4 parameters"):
            launch.check_params(k, [launch._param(v) for v in bad_args])


def test_check_params_without_driver_answer(monkeypatch):
    monkeypatch.setattr(launch, "kernel_param_sizes", lambda kernel: None)
    launch.check_params(_FakeKernel(), [launch._param(launch.i32(1))])  # nothing to compare


def test_prologue_ctas_per_sm_choice(monkeypatch):
    """The prologue's CTAs per SM: 3 on sm_90a and 2 elsewhere by default; an explicit 3 off
    sm_90a (where that build spills) and any other value are refused with the fix named."""
    from h3cupy.ops import prologue

    monkeypatch.setattr(prologue, "CTAS_PER_SM", None)
    assert prologue.ctas_per_sm("sm_90a") == 3
    assert prologue.ctas_per_sm("sm_120a") == 2
    assert prologue.ctas_per_sm("sm_89") == 2
    monkeypatch.setattr(prologue, "CTAS_PER_SM", 2)
    assert prologue.ctas_per_sm("sm_90a") == 2
    monkeypatch.setattr(prologue, "CTAS_PER_SM", 3)
    assert prologue.ctas_per_sm("sm_90a") == 3
    with pytest.raises(ValueError, match="sm_90a only"):
        prologue.ctas_per_sm("sm_120a")
    monkeypatch.setattr(prologue, "CTAS_PER_SM", 4)
    with pytest.raises(ValueError, match="expected 2, 3 or None"):
        prologue.ctas_per_sm("sm_90a")


def test_small_m_splits_model():
    """The swap-AB split choice: whole SM rounds for the N = 5376 shapes at M = 1 (42 weight tiles
    of 128 rows: 3 splits fill 126 of 132 SMs), no more splits than 64-deep k-tiles, and a
    wide N at M = 129 (where partials cost ~2 bytes of traffic per weight byte) kept unsplit or
    lightly split."""
    from h3cupy.ops import gemm

    assert gemm.small_m_splits(1, 5376, 7168, 132) == 3
    assert gemm.small_m_splits(1, 5376, 14336, 132) == 3
    assert gemm.small_m_splits(1, 512, 64, 132) == 1
    assert gemm.small_m_splits(129, 21504, 5376, 132) <= 3
