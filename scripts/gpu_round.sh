#!/usr/bin/env bash
# The whole GPU round, from the tree with nothing installed (PYTHONPATH=.): GPU tests, the
# self-test table and the benchmarks, writing logs and JSON to an output folder.
#
#   OUT=/some/dir bash scripts/gpu_round.sh [pytest -k expression]
#
# The NVRTC disk cache lives in .h3cache/ (ignored by git); its tarball is written to $OUT so a
# later round can start warm (restore it with: tar xf h3cache.tar).
set -u -o pipefail
OUT=${OUT:-out}
mkdir -p "$OUT"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 H3CUPY_CACHE_DIR=$PWD/.h3cache
[ -f "$OUT/../h3cache.tar" ] && tar xf "$OUT/../h3cache.tar"
{ nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv
  python3 -c 'import cupy, torch, numpy, ml_dtypes; print("cupy", cupy.__version__, "torch", torch.__version__, "numpy", numpy.__version__, "ml_dtypes", ml_dtypes.__version__)'
} 2>&1 | tee "$OUT/env.txt"

status=0
python3 -m pytest tests -q -rs -x ${1:+-k "$1"} -p no:cacheprovider 2>&1 | tee "$OUT/tests.log" || status=1
python3 -m h3cupy.selftest 2>&1 | tee "$OUT/selftest.log" || status=1
python3 benchmarks/prologue.py --json "$OUT/bench_prologue.json" 2>&1 | tee "$OUT/bench.log" || status=1
python3 benchmarks/gemm.py --m 129 4824 38592 --backend wgmma mma_sync --json "$OUT/bench_gemm.json" 2>&1 | tee -a "$OUT/bench.log" || status=1
python3 benchmarks/pre_attention.py --json "$OUT/bench_pre_attention.json" 2>&1 | tee -a "$OUT/bench.log" || status=1
tar cf "$OUT/h3cache.tar" .h3cache 2>/dev/null
exit $status
