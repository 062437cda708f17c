"""Run-time compilation of the CUDA sources in ``cuda_src/`` through NVRTC.

Every kernel h3cupy launches is built here, the same way on every machine:

* a generated stub ``#include``s one kernel file; its first line carries a SHA-256 of the whole
  ``cuda_src`` tree, so an edit to any header changes the stub and so the cache key (CuPy's own
  disk cache hashes only the source string it is given and would hand back a stale cubin);
* NVRTC is called directly through ``cupy_backends.cuda.libs.nvrtc`` with an explicit ``-arch``
  (``sm_90a`` / ``sm_120a``: CuPy's own compile path would pick plain ``sm_90`` and add
  ``-ftz=true``), so the same call compiles for any target on a machine with no GPU and no driver
  (what CI does);
* the cubin is cached on disk (``H3CUPY_CACHE_DIR``, default ``~/.cache/h3cupy``) and loaded with
  ``cupy.RawModule(path=...)``; template instantiations are found through NVRTC name expressions.

Knobs (read here and nowhere else): ``H3CUPY_CACHE_DIR``, ``H3CUPY_LINEINFO=1`` (add
``-lineinfo``), ``H3CUPY_PTXAS_VERBOSE=1`` (keep the ptxas register report in the cache's JSON).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import os
import re
import tempfile
from pathlib import Path

_PKG_DIR = Path(__file__).resolve().parent.parent


def cuda_src_dir() -> Path:
    """The ``cuda_src`` tree: next to the package in a checkout, inside it when installed."""
    for cand in (_PKG_DIR / "cuda_src", _PKG_DIR.parent / "cuda_src"):
        if (cand / "kernels").is_dir():
            return cand
    raise RuntimeError(
        f"h3cupy cannot find its CUDA sources (looked in {_PKG_DIR / 'cuda_src'} and "
        f"{_PKG_DIR.parent / 'cuda_src'}); reinstall the package."
    )


@functools.cache
def source_tree_hash() -> str:
    """SHA-256 over every file of ``cuda_src`` (relative path and contents, sorted)."""
    root = cuda_src_dir()
    h = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        h.update(str(path.relative_to(root)).encode())
        h.update(b"\0")
        h.update(path.read_bytes())
        h.update(b"\0")
    return h.hexdigest()


@dataclasses.dataclass(frozen=True)
class ModuleSpec:
    """One compiled module: a kernel file and the template instantiations to take from it.

    ``names`` are C++ name expressions such as ``"h3::prologue_smxx<5376, 0, long long>"``;
    ``defines`` are extra ``-D`` options (``("H3_FOO=1",)``).
    """

    file: str
    names: tuple[str, ...]
    defines: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        REGISTRY.append(self)


#: every ModuleSpec defined by an imported module (CI compiles them all for every target)
REGISTRY: list[ModuleSpec] = []


class CompileError(RuntimeError):
    """NVRTC rejected a kernel; the message carries the options and the full NVRTC log."""


def _nvrtc():
    from cupy_backends.cuda.libs import nvrtc

    return nvrtc


def nvrtc_version() -> tuple[int, int]:
    return tuple(_nvrtc().getVersion())


def compile_options(target: str, spec: ModuleSpec, *, verbose: bool = False) -> list[str]:
    """The full NVRTC option list for one module and target."""
    src = cuda_src_dir()
    opts = [
        f"-arch={target}",
        "-std=c++17",
        f"-I{src}",
        f"-I{src / 'include'}",
        # NOTE: IEEE division and sqrt, denormals kept: the references round at the same points.
        "--prec-div=true",
        "--prec-sqrt=true",
        "--ftz=false",
        "--fmad=true",
    ]
    opts += [f"-D{d}" for d in spec.defines]
    if os.environ.get("H3CUPY_LINEINFO") == "1":
        opts.append("-lineinfo")
    if verbose or os.environ.get("H3CUPY_PTXAS_VERBOSE") == "1":
        opts.append("--ptxas-options=-v")
    return opts


def render_stub(spec: ModuleSpec) -> str:
    """The generated translation unit: the tree hash line, then one include."""
    return (
        f'// h3cupy generated stub; cuda_src sha256 {source_tree_hash()}\n#include "{spec.file}"\n'
    )


@dataclasses.dataclass(frozen=True)
class CompileResult:
    cubin: bytes
    lowered: dict[str, str]  # name expression -> mangled symbol
    log: str
    options: tuple[str, ...]
    ptx: bytes = b""


def compile_module(spec: ModuleSpec, target: str, *, verbose: bool = False) -> CompileResult:
    """Compile a module for ``target`` with NVRTC. Needs no GPU and no driver."""
    nvrtc = _nvrtc()
    opts = compile_options(target, spec, verbose=verbose)
    prog = nvrtc.createProgram(render_stub(spec), f"h3_{Path(spec.file).stem}.cu", [], [])
    try:
        for name in spec.names:
            nvrtc.addNameExpression(prog, name)
        try:
            nvrtc.compileProgram(prog, opts)
        except nvrtc.NVRTCError as exc:
            log = nvrtc.getProgramLog(prog)
            raise CompileError(
                f"NVRTC failed to compile {spec.file} for {target} ({exc}).\n"
                f"options: {' '.join(opts)}\nname expressions: {list(spec.names)}\n"
                f"--- NVRTC log ---\n{log}"
            ) from None
        log = nvrtc.getProgramLog(prog)
        lowered = {name: nvrtc.getLoweredName(prog, name) for name in spec.names}
        cubin = nvrtc.getCUBIN(prog)
        ptx = nvrtc.getPTX(prog)
    finally:
        nvrtc.destroyProgram(prog)
    ptx = ptx if isinstance(ptx, bytes) else str(ptx).encode()
    return CompileResult(bytes(cubin), lowered, log, tuple(opts), ptx)


_PTXAS_FUNC = re.compile(r"Compiling entry function '([^']+)' for '([^']+)'")
_PTXAS_STACK = re.compile(
    r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads"
)
_PTXAS_REGS = re.compile(r"Used (\d+) registers")


def parse_ptxas_report(log: str) -> dict[str, dict[str, int]]:
    """Registers, stack and spill bytes per mangled kernel from a ``--ptxas-options=-v`` log."""
    out: dict[str, dict[str, int]] = {}
    current = None
    for line in log.splitlines():
        if m := _PTXAS_FUNC.search(line):
            current = m.group(1)
            out[current] = {}
        elif current and (m := _PTXAS_STACK.search(line)):
            out[current].update(stack=int(m[1]), spill_stores=int(m[2]), spill_loads=int(m[3]))
        elif current and (m := _PTXAS_REGS.search(line)):
            out[current]["registers"] = int(m[1])
    return out


def cache_dir() -> Path:
    return Path(os.environ.get("H3CUPY_CACHE_DIR") or Path.home() / ".cache" / "h3cupy")


def _cache_key(spec: ModuleSpec, target: str) -> str:
    h = hashlib.sha256()
    h.update(render_stub(spec).encode())
    h.update(repr((compile_options(target, spec), spec.names, nvrtc_version())).encode())
    return h.hexdigest()[:32]


def cache_paths(spec: ModuleSpec, target: str) -> tuple[Path, Path]:
    """Where ``build`` keeps one module's cubin and its JSON (lowered names, NVRTC log)."""
    stem = f"{Path(spec.file).stem}_{target}_{_cache_key(spec, target)}"
    d = cache_dir()
    return d / f"{stem}.cubin", d / f"{stem}.json"


def is_cached(spec: ModuleSpec, target: str) -> bool:
    """Whether ``build`` would load this module from the disk cache instead of compiling it."""
    return all(p.is_file() for p in cache_paths(spec, target))


def build(spec: ModuleSpec, target: str) -> tuple[Path, dict[str, str]]:
    """Compile (or find in the disk cache) and return the cubin path and the lowered names."""
    cubin_path, meta_path = cache_paths(spec, target)
    d = cubin_path.parent
    if cubin_path.is_file() and meta_path.is_file():  # (is_cached, without a second key)
        return cubin_path, json.loads(meta_path.read_text())["lowered"]
    res = compile_module(spec, target)
    d.mkdir(parents=True, exist_ok=True)
    # NOTE: write to a temporary file and rename, so processes racing on one key never read a
    # half-written cubin.
    for path, data in (
        (cubin_path, res.cubin),
        (meta_path, json.dumps({"lowered": res.lowered, "log": res.log}).encode()),
    ):
        fd, tmp = tempfile.mkstemp(dir=d, prefix=".tmp_")
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    return cubin_path, res.lowered


@functools.cache
def _load(spec: ModuleSpec, target: str, device_id: int):
    import cupy

    cubin_path, lowered = build(spec, target)
    with cupy.cuda.Device(device_id):
        module = cupy.RawModule(path=str(cubin_path))
        return {name: module.get_function(lowered[name]) for name in spec.names}


def get_kernel(spec: ModuleSpec, name: str, target: str | None = None):
    """The ``cupy`` kernel object of one name expression of ``spec`` on the current device."""
    import cupy

    from . import arch

    dev = cupy.cuda.Device().id
    target = target or arch.device_target(dev)
    return _load(spec, target, dev)[name]
