"""testing.EnergyMeter without a GPU: no NVML gives None for every reading, and NVML's units
(millijoules, MHz, milliwatts) come back as mJ, MHz and W. The NVML library is a stand-in that
writes known values through the same by-reference calls the driver's library takes."""

from __future__ import annotations

import ctypes

import pytest

pytest.importorskip("cupy")

from h3cupy.testing import EnergyMeter  # noqa: E402


class _FakeNvml:
    """nvmlDeviceGet* stand-ins: (handle, [type,] byref(value)) -> 0, value written."""

    def nvmlDeviceGetTotalEnergyConsumption(self, handle, ref):
        ref._obj.value = 123_456_789  # mJ since the driver loaded
        return 0

    def nvmlDeviceGetClockInfo(self, handle, clock_type, ref):
        ref._obj.value = 1980 if clock_type == 1 else 3201  # NVML_CLOCK_SM = 1
        return 0

    def nvmlDeviceGetPowerUsage(self, handle, ref):
        ref._obj.value = 699_500  # mW
        return 0


class _FailingNvml(_FakeNvml):
    def nvmlDeviceGetPowerUsage(self, handle, ref):
        return 3  # NVML_ERROR_NOT_SUPPORTED


def _meter(lib) -> EnergyMeter:
    m = EnergyMeter()
    m._lib, m._handle, m._ct = lib, ctypes.c_void_p(1), ctypes
    return m


def test_units():
    m = _meter(_FakeNvml())
    assert m.read() == 123_456_789.0
    assert m.clock_mhz() == 1980.0  # the SM clock, not the memory clock
    assert m.power_w() == pytest.approx(699.5)


def test_a_failing_field_reads_none():
    m = _meter(_FailingNvml())
    assert m.power_w() is None
    assert m.clock_mhz() == 1980.0


def test_without_nvml_every_reading_is_none():
    m = EnergyMeter()
    m._handle = None  # as where libnvidia-ml is absent or has no such device
    assert m.read() is None and m.clock_mhz() is None and m.power_w() is None
