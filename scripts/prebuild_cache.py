"""Fill the h3cupy cubin cache for one target on a machine without a GPU, so a GPU round starts
warm (NVRTC time on the lent GPU is device time).

The cache key holds the NVRTC (major, minor), so build with the NVRTC the GPU machine has: the
H200 runs cupy-cuda13x with NVRTC 13.0, so run this from an environment with cupy-cuda13x and
nvidia-cuda-nvrtc 13.0 (CUDA 13 cubins load on the H200's 580 driver). Keys also hold the include
paths, so build from the same checkout path the GPU machine sees (/work/main).

    H3CUPY_CACHE_DIR=$PWD/.h3cache PYTHONPATH=. python scripts/prebuild_cache.py sm_90a
"""

from __future__ import annotations

import sys
import time
from concurrent.futures import ProcessPoolExecutor

import h3cupy  # noqa: F401  (registers every ModuleSpec)
import h3cupy.ops.codec  # noqa: F401
import h3cupy.ops.gemm  # noqa: F401
import h3cupy.ops.mlp  # noqa: F401
import h3cupy.ops.out_proj  # noqa: F401
import h3cupy.ops.pre_attention  # noqa: F401
import h3cupy.ops.prologue  # noqa: F401
from h3cupy.core import jit


def _one(args: tuple[int, str]) -> str:
    i, target = args
    spec = jit.REGISTRY[i]
    t0 = time.perf_counter()
    path, _ = jit.build(spec, target)
    return f"{time.perf_counter() - t0:7.1f} s  {path.name}"


def main() -> None:
    target = sys.argv[1] if len(sys.argv) > 1 else "sm_90a"
    jobs = int(sys.argv[2]) if len(sys.argv) > 2 else 2
    print(f"NVRTC {jit.nvrtc_version()}, target {target}, cache {jit.cache_dir()}", flush=True)
    with ProcessPoolExecutor(jobs) as pool:
        for line in pool.map(_one, [(i, target) for i in range(len(jit.REGISTRY))]):
            print(line, flush=True)


if __name__ == "__main__":
    main()
