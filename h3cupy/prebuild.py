"""``python -m h3cupy.prebuild``: compile every h3cupy kernel module into the disk cache ahead of
the first call, so that a server's first request (or a CUDA-graph capture, which must not
compile) finds them ready. NVRTC needs no GPU and no driver, so this also runs on a CPU-only
image builder when the target is named.

    python -m h3cupy.prebuild                    # for this machine's GPU
    python -m h3cupy.prebuild --arch sm_90a      # for H100 / H200, on any machine
    python -m h3cupy.prebuild --arch sm_120a --check   # report what is cached, compile nothing

The cache is ``H3CUPY_CACHE_DIR`` (default ``~/.cache/h3cupy``). A cached module is found again
only by the same NVRTC version, the same h3cupy sources and the same install path (the key holds
the include paths), so run this in the environment that will serve, or in an image built the
same way. Exit status 0 when every module is cached at the end.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor

from .core import arch, jit


def load_all_specs() -> list[jit.ModuleSpec]:
    """Import every h3cupy module that defines kernels, and return their specs (``jit.REGISTRY``
    after the imports, in registration order)."""
    from . import weights  # noqa: F401
    from .ops import codec, gemm, mlp, out_proj, pre_attention, prologue  # noqa: F401

    return list(jit.REGISTRY)


def _build_one(args: tuple[jit.ModuleSpec, str]) -> tuple[float, str]:
    """Worker: build one module for a target; (seconds, the compile error or "")."""
    spec, target = args
    t0 = time.perf_counter()
    try:
        jit.build(spec, target)
    except jit.CompileError as exc:
        return time.perf_counter() - t0, str(exc)
    return time.perf_counter() - t0, ""


def _label(spec: jit.ModuleSpec) -> str:
    return spec.file + (f" [{', '.join(spec.defines)}]" if spec.defines else "")


def _target(requested: str | None) -> str:
    if requested:
        if requested not in arch.TARGETS:
            raise SystemExit(
                f"h3cupy prebuild: --arch expected one of {', '.join(arch.TARGETS)}, "
                f"got {requested!r}."
            )
        return requested
    from .testing import gpu_available

    if not gpu_available():
        raise SystemExit(
            "h3cupy prebuild: no CUDA GPU found, so the target is unknown; name it with --arch "
            f"(one of {', '.join(arch.TARGETS)}: sm_90a for H100 / H200, sm_120a for RTX 5090 / "
            "RTX PRO 6000)."
        )
    return arch.device_target()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m h3cupy.prebuild", description=__doc__.split("\n")[0]
    )
    ap.add_argument("--arch", help="NVRTC target (default: this machine's GPU)")
    ap.add_argument(
        "--jobs", type=int, default=min(4, os.cpu_count() or 1), help="parallel compiles"
    )
    ap.add_argument("--check", action="store_true", help="compile nothing; list what is missing")
    args = ap.parse_args(argv)
    if args.jobs < 1:
        ap.error(f"--jobs expected a positive count, got {args.jobs}")
    target = _target(args.arch)
    specs = load_all_specs()
    missing = [s for s in specs if not jit.is_cached(s, target)]
    print(
        f"h3cupy prebuild: {len(specs)} modules for {target}, NVRTC "
        f"{'.'.join(map(str, jit.nvrtc_version()))}, cache {jit.cache_dir()}: "
        f"{len(specs) - len(missing)} cached, {len(missing)} to build",
        flush=True,
    )
    if args.check:
        for spec in missing:
            print(f"  missing  {_label(spec)}")
        return 1 if missing else 0
    failed = []
    t0 = time.perf_counter()
    # Spawned workers: a fork of a process that has threads (CuPy's, torch's) may deadlock.
    # (A ModuleSpec pickles without registering itself again: unpickling skips __init__.)
    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(min(args.jobs, max(len(missing), 1)), mp_context=ctx) as pool:
        results = pool.map(_build_one, [(s, target) for s in missing])
        for spec, (secs, err) in zip(missing, results, strict=True):
            print(f"  {secs:6.1f} s  {_label(spec)}{'  FAILED' if err else ''}", flush=True)
            if err:
                failed.append((spec, err))
    for spec, err in failed:
        print(f"\n{_label(spec)} did not compile for {target}:\n{err}", file=sys.stderr)
    print(
        f"h3cupy prebuild: {len(missing) - len(failed)} built in "
        f"{time.perf_counter() - t0:.1f} s, {len(failed)} failed",
        flush=True,
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
