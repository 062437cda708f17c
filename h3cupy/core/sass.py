"""Read the machine code NVRTC makes, on a machine with no GPU (CI checks that the kernels issue
the instructions they were written for, e.g. the block-scaled ``OMMA`` on sm_120a).

NVRTC's PTX is assembled by ``ptxas`` and disassembled by ``cuobjdump`` (which calls
``nvdisasm``). The tools come from pip (``pip install "h3cupy[sass]"``: nvidia-cuda-nvcc,
nvidia-cuda-cuobjdump, nvidia-cuda-nvdisasm) or a CUDA toolkit on PATH; ``H3CUPY_CUDA_BIN``
names a folder to look in first.
NOTE: PTX goes through ptxas rather than disassembling NVRTC's own cubin because the pip
cuobjdump (13.x) cannot read cubins from NVRTC 12.x.
"""

from __future__ import annotations

import collections
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from . import jit

_TOOLS = ("ptxas", "cuobjdump", "nvdisasm")


def _candidate_dirs() -> list[Path]:
    dirs = []
    if os.environ.get("H3CUPY_CUDA_BIN"):
        dirs.append(Path(os.environ["H3CUPY_CUDA_BIN"]))
    try:
        import nvidia

        for root in nvidia.__path__:
            dirs += sorted(Path(root).glob("*/bin"))
    except ImportError:
        pass
    return dirs


def find_tools() -> dict[str, str] | None:
    """Paths of ptxas, cuobjdump and nvdisasm, or None when any is missing."""
    found = {}
    for tool in _TOOLS:
        path = next((str(d / tool) for d in _candidate_dirs() if (d / tool).is_file()), None)
        found[tool] = path or shutil.which(tool)
    return found if all(found.values()) else None


def disassemble(spec: jit.ModuleSpec, target: str) -> str:
    """SASS text of every kernel of ``spec`` for ``target``."""
    tools = find_tools()
    if tools is None:
        raise RuntimeError(
            "ptxas, cuobjdump and nvdisasm are needed to read SASS; pip install 'h3cupy[sass]' "
            "or put a CUDA toolkit's bin folder on PATH (or in H3CUPY_CUDA_BIN)"
        )
    res = jit.compile_module(spec, target)
    with tempfile.TemporaryDirectory() as d:
        ptx, cubin = Path(d) / "k.ptx", Path(d) / "k.cubin"
        ptx.write_bytes(res.ptx)
        subprocess.run(
            [tools["ptxas"], f"-arch={target}", str(ptx), "-o", str(cubin)],
            check=True,
            capture_output=True,
        )
        env = dict(
            os.environ,
            PATH=str(Path(tools["nvdisasm"]).parent) + os.pathsep + os.environ.get("PATH", ""),
        )
        out = subprocess.run(
            [tools["cuobjdump"], "-sass", str(cubin)],
            check=True,
            capture_output=True,
            text=True,
            env=env,
        )
    return out.stdout


_FUNC = re.compile(r"^\s+Function : (\S+)", re.M)
_INSTR = re.compile(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)")


def opcodes(sass: str) -> dict[str, collections.Counter]:
    """Per mangled kernel name: a count of full opcodes (``HMMA.16816.F32.BF16``, ...)."""
    out: dict[str, collections.Counter] = {}
    parts = _FUNC.split(sass)
    for name, body in zip(parts[1::2], parts[2::2], strict=True):
        out[name] = collections.Counter(_INSTR.findall(body))
    return out
