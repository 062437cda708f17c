"""Shared by the tests, ``python -m h3cupy.selftest`` and the benchmarks: device upload of
reference inputs, output poisoning, comparison against the NumPy references with the SPEC.md
section 8 bounds, and CUDA-event timing.

Each ``check_*`` function runs one operator on fresh random inputs in the model's distributions,
compares with :mod:`h3cupy.reference`, and returns :class:`Check` rows; it never raises on a
numerical mismatch (callers decide), so the self-test can print a table of everything.
"""

from __future__ import annotations

import dataclasses
import statistics
import time
from collections.abc import Callable

import numpy as np

from . import formats

# ------------------------------------------------------------------------------------- results


@dataclasses.dataclass
class Check:
    op: str
    shape: str
    metric: str
    value: float
    bound: float
    passed: bool
    detail: str = ""

    def row(self) -> str:
        flag = "PASS" if self.passed else "FAIL"
        return (
            f"{self.op:<34} {self.shape:<28} {self.metric:<26} {self.value:>11.4g} "
            f"{self.bound:>10.4g}  {flag} {self.detail}"
        )


def exact(op: str, shape: str, what: str, got: np.ndarray, want: np.ndarray) -> Check:
    """Bit-exact comparison (codes, scales); value = number of differing elements."""
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape:
        return Check(
            op,
            shape,
            f"{what} mismatches",
            float("inf"),
            0,
            False,
            f"shape {got.shape} != {want.shape}",
        )
    if got.dtype.itemsize == want.dtype.itemsize:
        width = (got.dtype.itemsize,)
        gb = np.ascontiguousarray(got).view(np.uint8).reshape(got.shape + width)
        wb = np.ascontiguousarray(want).view(np.uint8).reshape(want.shape + width)
        bad = (gb != wb).any(axis=-1)
    else:
        bad = got != want
    n = int(np.count_nonzero(bad))
    detail = ""
    if n:
        i = np.argwhere(bad)[0]
        detail = f"first at {tuple(int(j) for j in i)}: got {got[tuple(i)]} want {want[tuple(i)]}"
    return Check(op, shape, f"{what} mismatches", n, 0, n == 0, detail)


def bf16_close(
    op: str,
    shape: str,
    got: np.ndarray,
    want: np.ndarray,
    bound: np.ndarray,
    *,
    min_identical: float = 0.999,
) -> list[Check]:
    """``|got - want| <= bound`` element-wise (value reported: max |err| / bound, pass <= 1), and
    identical on at least ``min_identical`` of the elements."""
    got = np.asarray(got, np.float32)
    want = np.asarray(want, np.float32)
    nan = int(np.count_nonzero(~np.isfinite(got)))
    err = np.abs(got.astype(np.float64) - want)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(err == 0, 0.0, err / np.asarray(bound, np.float64))
    worst = float(ratio.max()) if ratio.size else 0.0
    ident = float(np.count_nonzero(err == 0)) / max(1, err.size)
    detail = f"{nan} non-finite" if nan else ""
    if worst > 1:
        i = np.unravel_index(int(np.argmax(ratio)), ratio.shape)
        detail += f" worst at {tuple(int(j) for j in i)}: got {got[i]} want {want[i]}"
    return [
        Check(
            op,
            shape,
            "max |err| / bound",
            worst if not nan else float("inf"),
            1.0,
            worst <= 1 and nan == 0,
            detail.strip(),
        ),
        Check(op, shape, "identical fraction", ident, min_identical, ident >= min_identical),
    ]


# ------------------------------------------------------------------------------------- devices


def gpu_available() -> bool:
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:
        return False


def upload(a: np.ndarray):
    """Copy a NumPy array to the current GPU, keeping views as views: a strided view of a larger
    array (a column chunk of a modulation projection) becomes the same view of the uploaded
    base, so the kernels see the real strides."""
    import cupy

    root = a
    while isinstance(root.base, np.ndarray):
        root = root.base
    if root is a or not isinstance(root, np.ndarray):
        return cupy.asarray(np.ascontiguousarray(a))
    base_d = cupy.asarray(np.ascontiguousarray(root))
    offset = a.__array_interface__["data"][0] - root.__array_interface__["data"][0]
    return cupy.ndarray(a.shape, a.dtype, base_d.data + offset, strides=a.strides)


def download(a) -> np.ndarray:
    """A device array (CuPy or torch) back to NumPy; bf16 comes back as ml_dtypes.bfloat16, e4m3
    (torch float8_e4m3fn, or a CuPy array viewed as ml_dtypes.float8_e4m3fn by
    :func:`h3cupy.core.interop.export`) as its raw uint8 codes, which is what every check and
    ``formats.e4m3_decode`` take."""
    import cupy

    if type(a).__module__.startswith("torch"):
        import torch

        if a.dtype == torch.bfloat16:
            return a.view(torch.int16).cpu().numpy().view(formats.BF16)
        if a.dtype == torch.float8_e4m3fn:
            return a.view(torch.uint8).cpu().numpy()
        return a.cpu().numpy()
    if a.dtype == formats.E4M3:
        # NOTE: a value cast (np.asarray(..., np.uint8)) of float8 data would turn codes into
        # truncated numbers; the bytes are what is compared.
        a = a.view(cupy.uint8)
    return cupy.asnumpy(a)


def poison(*arrays) -> None:
    """Fill outputs with 0xFF bytes (NaN for bf16/fp32/e4m3) before a launch, so an element the
    kernel forgets to write cannot pass as a right answer."""
    for a in arrays:
        if a is None:
            continue
        if type(a).__module__.startswith("torch"):
            import torch

            a.view(torch.uint8).fill_(0xFF)
        else:
            a.view(np.uint8).fill(0xFF)


def poisoned_bf16_run(call: Callable[[], object], outputs) -> tuple[list[np.ndarray], bool]:
    """Poison the bf16 ``outputs`` (:func:`poison`), run ``call()`` and return each output's bits
    (uint16 arrays) and whether every element was written: 0xFFFF, the poison, is a NaN that no
    op of this package writes. Used to compare two forms of one op byte for byte."""
    poison(*outputs)
    call()
    got = [download(t).view(np.uint16).copy() for t in outputs]
    return got, not any((g == 0xFFFF).any() for g in got)


def graph_checks(op: str, shape: str, call: Callable[[], object], outputs) -> list[Check]:
    """CUDA-graph safety of one operator call whose outputs, workspaces and device scalars are all
    supplied (``call`` takes no arguments; ``outputs`` are the CuPy arrays it writes): an eager
    run gives reference bytes; a second eager run into poisoned outputs must give the same bytes
    (determinism); a run captured on a fresh CuPy stream in the global capture mode (torch's
    default: no cudaMalloc and no host sync allowed inside) and replayed into poisoned outputs
    must give them too."""
    import cupy

    def snapshot():
        return [cupy.ascontiguousarray(o).view(cupy.uint8).copy() for o in outputs]

    def same(ref) -> int:
        return sum(int(cupy.count_nonzero(a != b)) for a, b in zip(snapshot(), ref, strict=True))

    call()
    cupy.cuda.Device().synchronize()
    first = snapshot()
    poison(*outputs)
    call()
    cupy.cuda.Device().synchronize()
    rerun = same(first)
    poison(*outputs)
    cupy.cuda.Device().synchronize()
    stream = cupy.cuda.Stream(non_blocking=True)
    with stream:
        stream.begin_capture(mode=cupy.cuda.runtime.streamCaptureModeGlobal)
        try:
            call()
        finally:
            graph = stream.end_capture()
    graph.launch(stream)
    stream.synchronize()
    replay = same(first)
    return [
        Check(op, shape, "eager rerun differing bytes", rerun, 0, rerun == 0),
        Check(op, shape, "graph replay differing bytes", replay, 0, replay == 0),
    ]


# -------------------------------------------------------------------------------------- timing


def bench(
    fn: Callable[[int], object],
    *,
    reps: int = 30,
    warmup: int = 5,
    rotate: int = 1,
    batches: int = 5,
) -> dict[str, float]:
    """Eager time of ``fn(i)`` per call: ``batches`` batches of ``reps`` back-to-back calls, each
    batch timed with CUDA events on the current stream; ``i`` cycles over ``rotate`` input sets
    (to keep inputs out of L2). Back-to-back launches queue up, so this is the GPU time when the
    GPU is the bottleneck and the host launch time when the host is. Returns the median / min /
    max of the batch means (ms per call)."""
    import cupy

    for i in range(warmup):
        fn(i % rotate)
    stream = cupy.cuda.get_current_stream()
    times = []
    for b in range(batches):
        start, stop = cupy.cuda.Event(), cupy.cuda.Event()
        start.record(stream)
        for i in range(reps):
            fn((b * reps + i) % rotate)
        stop.record(stream)
        stop.synchronize()
        times.append(cupy.cuda.get_elapsed_time(start, stop) / reps)
    return {
        "median_ms": statistics.median(times),
        "min_ms": min(times),
        "max_ms": max(times),
        "reps": reps * batches,
    }


def bench_cupy_graph(
    fn: Callable[[int], object], *, calls: int = 20, reps: int = 5, rotate: int = 1
) -> dict[str, float]:
    """GPU time per call of ``fn(i)`` on CuPy operands without host overhead: ``calls`` calls
    captured in one CuPy CUDA graph (on a side stream that becomes CuPy's current stream, which
    h3cupy launches on for CuPy operands), replayed ``reps`` times, each replay timed with
    events. ``fn`` must not allocate (pass preallocated outputs)."""
    import cupy

    stream = cupy.cuda.Stream(non_blocking=True)
    with stream:
        for i in range(rotate):
            fn(i)
        stream.synchronize()
        stream.begin_capture()
        for i in range(calls):
            fn(i % rotate)
        graph = stream.end_capture()
        graph.launch(stream)
        stream.synchronize()
        times = []
        for _ in range(reps):
            start, stop = cupy.cuda.Event(), cupy.cuda.Event()
            start.record(stream)
            graph.launch(stream)
            stop.record(stream)
            stop.synchronize()
            times.append(cupy.cuda.get_elapsed_time(start, stop) / calls)
    return {
        "median_ms": statistics.median(times),
        "min_ms": min(times),
        "max_ms": max(times),
        "reps": reps * calls,
    }


def _capture(fn: Callable[[int], object], rotate: int):
    import torch

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for i in range(rotate):
            fn(i)  # warm-up: compiles, loads, unlocks shared memory outside the capture
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):  # on torch's own capture stream, as users do
        for i in range(rotate):
            fn(i)
    graph.replay()
    torch.cuda.synchronize()
    return graph


class EnergyMeter:
    """The GPU's energy counter, SM clock and power draw through NVML (read with ctypes from the
    driver's libnvidia-ml); the device is found by the PCI bus id of CuPy's current device.
    Each reading is None where NVML or that field is unavailable."""

    def __init__(self) -> None:
        import ctypes
        import sys

        import cupy

        self._handle = None
        try:
            lib = ctypes.CDLL("nvml.dll" if sys.platform == "win32" else "libnvidia-ml.so.1")
            if lib.nvmlInit_v2() != 0:
                return
            handle = ctypes.c_void_p()
            bus = cupy.cuda.Device().pci_bus_id.encode()
            if lib.nvmlDeviceGetHandleByPciBusId_v2(bus, ctypes.byref(handle)) != 0:
                return
            self._lib, self._handle, self._ct = lib, handle, ctypes
        except OSError:
            return

    def _query(self, name: str, ctype: str, *args) -> int | None:
        """NVML's ``name(handle, *args, &value)`` with ``value`` a ctypes ``ctype``, or None where
        it fails or NVML is absent."""
        if self._handle is None:
            return None
        value = getattr(self._ct, ctype)()
        if getattr(self._lib, name)(self._handle, *args, self._ct.byref(value)):
            return None
        return value.value

    def read(self) -> float | None:
        """The energy counter in millijoules (since the driver loaded), or None."""
        v = self._query("nvmlDeviceGetTotalEnergyConsumption", "c_ulonglong")
        return None if v is None else float(v)

    def clock_mhz(self) -> float | None:
        """The current SM clock (NVML_CLOCK_SM = 1), or None."""
        v = self._query("nvmlDeviceGetClockInfo", "c_uint", 1)
        return None if v is None else float(v)

    def power_w(self) -> float | None:
        """The board's power draw (nvmlDeviceGetPowerUsage, milliwatts) in watts, or None."""
        v = self._query("nvmlDeviceGetPowerUsage", "c_uint")
        return None if v is None else v / 1e3


def _sustained(graph, per_ms: float, rotate: int, meter: EnergyMeter, window_ms: float) -> dict:
    """Replays `graph` back to back: 0.5 s to settle, then `window_ms` measured while a thread
    samples the SM clock and the power draw every 2 ms. Per call: wall time, energy (counter),
    the mean clock and power over the window, and the clock cycles (time x mean clock). The
    window is wall time: a graph that replays faster than the host enqueues it (tens of µs)
    measures the host, not the GPU."""
    import threading

    import torch

    for _ in range(int(500.0 / per_ms) + 1):
        graph.replay()
    torch.cuda.synchronize()
    clocks: list[float] = []
    watts: list[float] = []
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            c, w = meter.clock_mhz(), meter.power_w()
            if c is not None:
                clocks.append(c)
            if w is not None:
                watts.append(w)
            time.sleep(0.002)

    n = max(3, int(window_ms / per_ms) + 1)
    thread = threading.Thread(target=sample, daemon=True)
    e0, t0 = meter.read(), time.perf_counter()
    thread.start()
    for _ in range(n):
        graph.replay()
    torch.cuda.synchronize()
    e1, t1 = meter.read(), time.perf_counter()
    done.set()
    thread.join()
    calls = n * rotate
    res = {"sustained_ms": (t1 - t0) * 1e3 / calls}
    if e0 is not None and e1 is not None:
        res["energy_mj"] = (e1 - e0) / calls
        res["power_w"] = (e1 - e0) / 1e3 / (t1 - t0)
    if clocks:
        res["clock_mhz"] = statistics.fmean(clocks)
        res["mcycles"] = res["sustained_ms"] * res["clock_mhz"] / 1e3
    if watts:
        res["power_sampled_w"] = statistics.fmean(watts)
    return res


def balanced_order(n: int, circuits: int, seed: int = 0) -> list[int]:
    """A replay order over ``n`` forms in which every form follows every other form equally
    often: ``circuits`` Eulerian circuits of the complete directed graph on the forms (no self
    loops; Hierholzer's walk over shuffled, seeded edge lists), concatenated. Element 0 is a
    replay that only sets the first timed one's predecessor; each later element is timed, and
    over each circuit every ordered pair (a, b), a != b, appears exactly once as (predecessor,
    form): each form is timed ``n - 1`` times per circuit, once after each other form. One form:
    ``circuits + 1`` replays of it."""
    import random

    if n == 1:
        return [0] * (circuits + 1)
    rng = random.Random(seed)
    seq = [0]
    for _ in range(circuits):
        edges = {u: [v for v in range(n) if v != u] for u in range(n)}
        for u in edges:
            rng.shuffle(edges[u])
        stack, walk = [0], []
        while stack:
            u = stack[-1]
            if edges[u]:
                stack.append(edges[u].pop())
            else:
                walk.append(stack.pop())
        seq.extend(walk[::-1][1:])  # from 0 back to 0; 0 itself is the previous element
    return seq


def shuffled_order(n: int, reps: int, seed: int = 0) -> list[int]:
    """The order before session 33: ``reps`` rounds, each every form once in a fresh seeded
    random order (element 0 an untimed replay of the first round's last form, so that the
    timed replays match the balanced order's count of predecessors). Each form is timed ``reps``
    times, but its predecessors are whatever the seed gives: session 33 counted, for the BF16
    pre-attention benchmark's nine forms and 20 rounds, one form after the light eager chain in 7
    rounds and another (the same kernel) in 1."""
    import random

    rng = random.Random(seed)
    rounds = []
    for _ in range(reps):
        order = list(range(n))
        rng.shuffle(order)
        rounds.extend(order)
    return [rounds[-1], *rounds]


def add_order_argument(parser) -> None:
    """A benchmark's ``--order`` option for :func:`bench_graphs` (argparse)."""
    parser.add_argument(
        "--order",
        default="balanced",
        choices=["balanced", "shuffle"],
        help="the replays' order (testing.bench_graphs): balanced, every form timed once after"
        " each other form per circuit (the default since session 33), or shuffle, the seeded"
        " random rounds before it",
    )


def bench_graphs(
    fns: dict[str, Callable[[int], object]],
    *,
    reps: int = 10,
    rotate: int = 1,
    energy: bool = False,
    order: str = "balanced",
) -> dict[str, dict[str, float]]:
    """GPU time of each ``fn(i)`` without host overhead: the calls for every input set are
    captured in one torch CUDA graph per function; the graphs are then replayed interleaved, each
    replay timed with events (per call = replay / ``rotate``). Interleaving keeps the compared
    functions under the same clocks and temperature. ``fn`` must not allocate through CuPy's pool
    (pass preallocated outputs).

    ``order``: ``"balanced"`` (the default since session 33): :func:`balanced_order`, every
    form timed equally often after each other form, at least ``reps`` times (``ceil(reps /
    (n - 1))`` circuits of ``n - 1`` each). Under the power cap a replay's time depends on what
    ran before it (a heavy GEMM before it: slower; a memory-bound chain: faster), so an order
    that gives one form more light predecessors than another biases the comparison; the balanced
    order gives every form the same mix. ``"shuffle"``: :func:`shuffled_order`, the rounds in
    seeded random orders that were the default from session 14 (before it, a fixed or rotated
    order gave each form always the same predecessor): with it, two forms running the same kernel
    at M = 38592 read 2.0-4.7% apart, always with the same sign, in five runs on an H100 and an
    H200 (benchmarks/NOTES.md, session 33).

    Per form: ``median_ms``, ``min_ms``, ``max_ms``, ``reps`` (timed replays) and ``after_ms``
    (the median time after each predecessor, by name: the carryover the order balances).

    ``energy``: then each function's graph is also replayed back to back (0.5 s to settle, a
    1 s window, twice, the second pass in reverse order; :func:`_sustained`), adding per call
    ``sustained_ms``, ``energy_mj`` and ``power_w`` (NVML's energy counter), ``clock_mhz`` (the
    mean SM clock over the window), ``mcycles`` (millions of clock cycles per call: time x clock,
    the figure that compares kernels run at different clocks) and ``power_sampled_w``. Absent
    where NVML is not available. The counter lags the work (session 9: 0.3 s windows without
    settling read up to 33% apart for equal work), hence the settling."""
    import torch

    if order not in ("balanced", "shuffle"):  # (before any capture)
        raise ValueError(f"order: expected 'balanced' or 'shuffle', got {order!r}")
    graphs = {name: _capture(fn, rotate) for name, fn in fns.items()}
    names = list(graphs)
    n = len(names)
    if order == "balanced":
        seq = balanced_order(n, max(1, -(-reps // max(1, n - 1))))
    else:
        seq = shuffled_order(n, reps)
    times: dict[str, list[float]] = {name: [] for name in names}
    after: dict[str, dict[str, list[float]]] = {name: {} for name in names}
    graphs[names[seq[0]]].replay()  # the first timed replay's predecessor, untimed
    for prev, cur in zip(seq[:-1], seq[1:], strict=True):
        name = names[cur]
        start = torch.cuda.Event(enable_timing=True)
        stop = torch.cuda.Event(enable_timing=True)
        start.record()
        graphs[name].replay()
        stop.record()
        stop.synchronize()
        ms = start.elapsed_time(stop) / rotate
        times[name].append(ms)
        after[name].setdefault(names[prev], []).append(ms)
    out = {
        name: {
            "median_ms": statistics.median(t),
            "min_ms": min(t),
            "max_ms": max(t),
            "reps": len(t),
            "after_ms": {p: statistics.median(v) for p, v in after[name].items()},
        }
        for name, t in times.items()
    }
    meter = EnergyMeter() if energy else None
    metered = names if meter is not None and meter.read() is not None else []
    # Two passes in opposite orders, averaged, so that a drift of the clock over the passes
    # (temperature) does not favour the forms measured first.
    passes = [metered, metered[::-1]] if metered else []
    acc: dict[str, list[dict]] = {name: [] for name in metered}
    for pass_names in passes:
        for name in pass_names:
            per_ms = max(out[name]["median_ms"] * rotate, 1e-3)
            acc[name].append(_sustained(graphs[name], per_ms, rotate, meter, 1000.0))
    for name, runs in acc.items():
        for key in runs[0]:
            vals = [r[key] for r in runs if key in r]
            out[name][key] = statistics.fmean(vals)
    del graphs
    return out


def sustained_fields(
    times: dict[str, dict[str, float]],
    keys: tuple[str, ...] = ("sustained_ms", "clock_mhz", "mcycles", "energy_mj", "power_w"),
    ours: str = "h3",
    bases: tuple[str, ...] = ("compiled", "gemm"),
) -> dict[str, float]:
    """A benchmark row's fields from :func:`bench_graphs` ``(energy=True)``: ``{form}_{key}``
    for each form and key it measured, and ``sustained_speedup_vs_{base}`` (the base's sustained
    time over ``ours``'s) for each base measured beside ``ours``. Empty without the pass."""
    row = {f"{k}_{key}": v[key] for k, v in times.items() for key in keys if key in v}
    for base in bases:
        if f"{base}_sustained_ms" in row and f"{ours}_sustained_ms" in row:
            row[f"sustained_speedup_vs_{base}"] = (
                row[f"{base}_sustained_ms"] / row[f"{ours}_sustained_ms"]
            )
    return row


def device_info() -> dict[str, object]:
    import cupy

    dev = cupy.cuda.Device()
    props = cupy.cuda.runtime.getDeviceProperties(dev.id)
    name = props["name"]
    name = name.decode() if isinstance(name, bytes) else name
    from .core import arch, jit

    return {
        "gpu": name,
        "compute_capability": dev.compute_capability,
        "target": arch.device_target(dev.id),
        "sms": props["multiProcessorCount"],
        "cupy": cupy.__version__,
        "nvrtc": ".".join(map(str, jit.nvrtc_version())),
        "driver": cupy.cuda.runtime.driverGetVersion(),
    }


def torch_cuda(a: np.ndarray):
    """A host array (ml_dtypes bfloat16 included) as a CUDA torch tensor of the same dtype and
    values: the benchmarks' and tests' upload of host-drawn inputs."""
    import torch

    a = np.ascontiguousarray(a)
    if a.dtype.name == "bfloat16":
        return torch.from_numpy(a.view(np.int16)).cuda().view(torch.bfloat16)
    return torch.from_numpy(a).cuda()


def bf16_pre_attention_torch_args(m: int, p: int, rng):
    """Inputs of ``minimax_h3_bf16_pre_attention`` as CUDA torch tensors, drawn in the model's
    distributions (``reference.inputs.pre_attention_inputs``, 9 table rows; the AdaLN tables as
    column chunks of one [rows, 6 * 5376] modulation): ``(args, out, workspace)`` with ``args``
    the nine positional arguments, ``out`` bf16 ``[p, m, 56 / p, 3, 128]`` and ``workspace``
    bf16 ``[m, 5376]`` (both uninitialised)."""
    import torch

    from h3cupy.reference import inputs

    host = inputs.pre_attention_inputs(m, rows=9, rng=rng)
    t = torch_cuda
    mod = t(host["modulation"])
    args = (
        t(host["x"]),
        t(host["x_norm_weight"]),
        mod[:, 5376:10752],  # adaln_scale: a column chunk, row stride 6 * 5376
        mod[:, 0:5376],  # adaln_shift
        t(host["adaln_index"]),
        t(host["qkv_weight"]),
        t(host["q_norm_weight"]),
        t(host["k_norm_weight"]),
        t(host["rope_cos_sin"]),
    )
    out = torch.empty((p, m, 56 // p, 3, 128), dtype=torch.bfloat16, device="cuda")
    ws = torch.empty((m, 5376), dtype=torch.bfloat16, device="cuda")
    return args, out, ws


def nvfp4_gemm_operands(rng, m: int, n: int, k: int):
    """NVFP4 GEMM operands quantized on the host from bf16 values in the model's ranges
    (activations ~N(0, 0.5), weights ~N(0, 0.01)): activation codes and linear scales, weight
    codes and 128x4-swizzled scales, and the two global scales (448 * 6 / amax)."""
    a = formats.to_bf16(rng.normal(0, 0.5, (m, k)).astype(np.float32))
    w = formats.to_bf16(rng.normal(0, 0.01, (n, k)).astype(np.float32))
    ga = formats.nvfp4_global_scale_from_amax(np.abs(a.astype(np.float32)).max())
    gw = formats.nvfp4_global_scale_from_amax(np.abs(w.astype(np.float32)).max())
    aq, asf = formats.nvfp4_quantize(a, ga)
    wq, wsf = formats.nvfp4_quantize(w, gw)
    return aq, asf, wq, formats.swizzle_sf_128x4(wsf), ga, gw


def need_sm90a(what: str) -> None:
    """Skip the calling test (pytest) unless the current GPU is sm_90a: ``what`` runs there only
    in this version (the sm_90a engine's ops and paths)."""
    import pytest

    from .core import arch

    if arch.current_target() != "sm_90a":
        pytest.skip(f"{what} runs on sm_90a in this version")


def assert_passed(results: list[Check]) -> None:
    """Every check passed; the failing rows (op, shape, metric, value, bound) otherwise."""
    bad = [r.row() for r in results if not r.passed]
    assert not bad, "\n".join(bad)


def assert_gemm_close(got, ref) -> None:
    """A GEMM output against a float64 host GEMM of the same operands (issue #3's bounds):
    relative Frobenius error <= 3e-3 and no element off by more than 1e-2 * max|ref| (the output
    is rounded to bf16, whose half-ulp is 2^-9 relative; fp32 accumulation over K <= 14336 adds
    far less). A non-finite element (the poison left unwritten, or an overflow) fails."""
    got = np.asarray(got, dtype=np.float64)
    assert np.all(np.isfinite(got)), "non-finite output (unwritten or overflow)"
    rel = np.linalg.norm(got - ref) / np.linalg.norm(ref)
    worst = np.max(np.abs(got - ref)) / np.max(np.abs(ref))
    assert rel <= 3e-3 and worst <= 1e-2, (rel, worst)


def assert_fp8_nan_rows(got_q, got_s, rows_in, nan_rows) -> None:
    """Per-row FP8 of ``rows_in`` (bf16 rows, some holding a NaN) as formats.py's per-token /
    per-channel quantizer gives it: rows ``nan_rows`` get a NaN scale and every code a NaN code
    (0x7f, or 0xff: the element's sign), np.max keeping the NaN; every other row is bit-exact.
    ``got_q`` / ``got_s``: the device's uint8 codes and fp32 scales, downloaded."""
    want_q, want_s = formats.fp8_quantize_per_token(rows_in)
    assert np.isnan(want_s[nan_rows]).all()  # the reference's reading of a NaN row
    assert np.isnan(got_s[nan_rows]).all(), got_s[nan_rows]
    assert np.all((got_q[nan_rows] & 0x7F) == 0x7F), "codes of a NaN row must all be NaN"
    keep = np.setdiff1d(np.arange(len(got_s)), nan_rows)
    assert np.array_equal(got_q[keep], want_q[keep])
    assert np.array_equal(got_s[keep].view(np.uint32), want_s[keep].view(np.uint32))


def assert_nvfp4_nan_blocks(got_q, got_sf, rows_in, g) -> None:
    """NVFP4 of ``rows_in`` (bf16 ``[M, K]``, some elements NaN) under the finite global scale
    ``g`` as formats.nvfp4_quantize gives it: every 16-value block holding a NaN gets the NaN
    scale code 0x7F (np.max keeping the NaN), so that the block dequantizes to NaN, and its codes
    are not compared (formats.py's docstring); every other block's codes and scale are
    bit-exact. At least one block must hold a NaN. ``got_q`` / ``got_sf``: the device's packed
    codes ``[M, K/2]`` and linear ue4m3 scales ``[M, K/16]``, downloaded."""
    want_q, want_sf = formats.nvfp4_quantize(rows_in, g)
    m, k = rows_in.shape
    nan_blocks = np.isnan(rows_in.astype(np.float32)).reshape(m, k // 16, 16).any(axis=2)
    assert nan_blocks.any(), "no block holds a NaN"
    assert np.all(want_sf[nan_blocks] == 0x7F)  # the reference's reading of a NaN block
    assert np.all(got_sf[nan_blocks] == 0x7F), got_sf[nan_blocks]
    assert np.array_equal(got_sf[~nan_blocks], want_sf[~nan_blocks])
    keep = np.repeat(~nan_blocks, 8, axis=1)  # 8 packed bytes per block
    assert np.array_equal(got_q[keep], want_q[keep])
    got_v = formats.nvfp4_dequantize(got_q, got_sf, g)
    assert np.isnan(got_v.reshape(m, k // 16, 16)[nan_blocks]).all()
