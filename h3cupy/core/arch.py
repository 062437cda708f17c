"""Device -> NVRTC target, and what each target can run.

The target string is spelled exactly as NVRTC wants it after ``-arch=``. The ``a`` targets are
the architecture-specific ones: ``sm_90a`` unlocks wgmma/setmaxnreg on Hopper, ``sm_120a`` the
block-scaled ``mma.sync kind::*`` forms on GB202 boards.
"""

from __future__ import annotations

import functools

# compute capability -> NVRTC target
_TARGETS: dict[tuple[int, int], str] = {
    (12, 0): "sm_120a",
    (9, 0): "sm_90a",
    (8, 9): "sm_89",
    (8, 0): "sm_80",
}

#: every target h3cupy builds for, newest first
TARGETS: tuple[str, ...] = tuple(_TARGETS.values())

#: targets compiled by CI on a machine without a GPU
CI_TARGETS: tuple[str, ...] = ("sm_120a", "sm_90a", "sm_89")


def target_for_capability(major: int, minor: int) -> str:
    """Map a compute capability to the NVRTC target h3cupy compiles for.

    Raises RuntimeError for a device h3cupy has no kernels for.
    """
    try:
        return _TARGETS[(major, minor)]
    except KeyError:
        known = ", ".join(f"{a}.{b} ({t})" for (a, b), t in _TARGETS.items())
        raise RuntimeError(
            f"h3cupy has no kernels for compute capability {major}.{minor}; supported: {known}. "
            "Run on one of those GPUs."
        ) from None


def sm_number(target: str) -> int:
    """'sm_90a' -> 90, 'sm_120a' -> 120."""
    digits = target.removeprefix("sm_").rstrip("af")
    return int(digits)


def supports_fp8(target: str) -> bool:
    """e4m3 conversions (cvt.rn.satfinite.e4m3x2) and e4m3 mma.sync need sm_89 or newer."""
    return sm_number(target) >= 89


@functools.cache
def device_target(device_id: int | None = None) -> str:
    """The target of a CUDA device (the current one when ``device_id`` is None)."""
    import cupy

    dev = cupy.cuda.Device(device_id) if device_id is not None else cupy.cuda.Device()
    cc = dev.compute_capability  # e.g. "90"
    major, minor = int(cc[:-1]), int(cc[-1])
    return target_for_capability(major, minor)


def current_device() -> int:
    """The current CUDA device's id (cudaGetDevice: what torch.cuda.set_device sets too)."""
    import cupy

    return int(cupy.cuda.Device().id)


def current_target() -> str:
    """Target of the current CUDA device."""
    return device_target(current_device())


@functools.cache
def sm_count(device_id: int) -> int:
    """Number of multiprocessors of a device (sizes persistent grids)."""
    import cupy

    return int(cupy.cuda.Device(device_id).attributes["MultiProcessorCount"])


#: the opt-in shared memory per block of compute capability 12.0 (RTX 5090, RTX PRO 6000), 8.6
#: and 8.9: 99 KiB. Every kernel that sm_120a runs fits it (h3/gemm_mma_tma.cuh's sm_120 plans).
SM120_SMEM_LIMIT = 101376


@functools.cache
def smem_optin(device_id: int) -> int:
    """The largest dynamic shared memory a block of this device may opt into (bytes):
    232448 on H100 / H200, 101376 on sm_120 boards."""
    import cupy

    rt = cupy.cuda.runtime
    attr = getattr(rt, "cudaDevAttrMaxSharedMemoryPerBlockOptin", 97)  # 97 in driver_types.h
    return int(rt.deviceGetAttribute(attr, device_id))


#: ``fp8_mma_form`` values of SPEC §6: -1 the board's form, 0 the legacy ``m16n8k32`` e4m3
#: mma.sync, 2 ``kind::mxf8f6f4`` with unit scales (SM120 only)
FP8_MMA_FORMS: tuple[int, ...] = (-1, 0, 2)


@functools.cache
def device_name(device_id: int) -> str:
    import cupy

    name = cupy.cuda.runtime.getDeviceProperties(device_id)["name"]
    return name.decode() if isinstance(name, bytes) else str(name)


def fp8_mma_code(form: int, target: str, name: str = "") -> int:
    """The kernels' e4m3 mma.sync form for an ``fp8_mma_form`` (SPEC §6): 1 the legacy
    ``m16n8k32`` form, 2 ``kind::mxf8f6f4`` with unit scales. Only sm_120a has form 2; elsewhere
    the argument is validated, then ignored. -1 picks form 2 on GeForce GB202 boards (twice the
    legacy form's fp32-accumulating rate there, per the seed) and the legacy form otherwise (RTX
    PRO 6000). The two forms give identical bits."""
    if form not in FP8_MMA_FORMS:
        raise ValueError(
            f"fp8_mma_form: expected one of {FP8_MMA_FORMS} (-1 per board, 0 legacy, 2 "
            f"kind::mxf8f6f4), got {form!r}"
        )
    if target != "sm_120a":
        return 1
    if form == -1:
        return 2 if "geforce" in name.lower() else 1
    return 1 if form == 0 else 2


def operand_device(x) -> int | None:
    """The CUDA device of an operand (a torch CUDA tensor, a CuPy array, an ``interop.Tensor``,
    or any object with ``__dlpack_device__`` or ``__cuda_array_interface__``, as interop accepts),
    or None for anything else (the op's checks then refuse it)."""
    dev = getattr(x, "device", None)
    if isinstance(dev, int):  # interop.Tensor
        return dev
    if getattr(dev, "type", None) == "cuda" and dev.index is not None:  # torch.device
        return int(dev.index)
    idx = getattr(dev, "id", None)  # cupy.cuda.Device
    if isinstance(idx, int):
        return idx
    if hasattr(x, "__dlpack_device__"):  # (device type, id); 2 is kDLCUDA
        kind, idx = x.__dlpack_device__()
        return int(idx) if int(kind) == 2 else None
    cai = getattr(x, "__cuda_array_interface__", None)
    if cai is not None and cai.get("data", (0,))[0]:  # the device that owns the pointer
        import cupy

        try:
            return int(cupy.cuda.runtime.pointerGetAttributes(cai["data"][0]).device)
        except cupy.cuda.runtime.CUDARuntimeError:
            return None
    return None


def device_scope(dev: int):
    """A context in which ``dev`` is the current device (cudaSetDevice, only when it is not
    already), restoring the caller's current device on exit."""
    import cupy

    return cupy.cuda.Device(dev)


def on_operand_device(param: str):
    """Run a public entry point with the device of its first operand (positional, or the keyword
    ``param``) current: its kernels load there, CuPy's current stream and allocations are that
    device's, and the launch goes to that device's context, whatever device the caller has
    current. The caller's current device is restored after the call."""

    def wrap(fn):
        @functools.wraps(fn)
        def run(*args, **kwargs):
            dev = operand_device(args[0] if args else kwargs.get(param))
            if dev is None:
                return fn(*args, **kwargs)
            with device_scope(dev):
                return fn(*args, **kwargs)

        return run

    return wrap
