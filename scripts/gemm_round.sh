#!/usr/bin/env bash
# The GEMM engine's GPU round (issue #3): its tests, compute-sanitizer memcheck of every path at a
# small M, and the benchmark against cuBLAS at the H3 shapes.
#
#   OUT=/some/dir bash scripts/gemm_round.sh [benchmark args...]
set -u -o pipefail
OUT=${OUT:-out}
mkdir -p "$OUT"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 H3CUPY_CACHE_DIR=$PWD/.h3cache
status=0
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv | tee "$OUT/env.txt"
python3 -m pytest tests/test_gemm_gpu.py tests/test_mma_probe_gpu.py tests/test_tma_gpu.py -q -rs \
  -p no:cacheprovider 2>&1 | tee "$OUT/tests_gemm.log" || status=1
if command -v compute-sanitizer >/dev/null; then
  timeout 240 compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 3 python3 scripts/memcheck_gemm.py \
    2>&1 | tail -20 | tee "$OUT/memcheck_gemm.log" || status=1
fi
python3 benchmarks/host_overhead.py --profile 2>&1 | tee "$OUT/host_overhead.log" || status=1
python3 benchmarks/gemm.py --json "$OUT/bench_gemm.json" "$@" 2>&1 | tee "$OUT/bench_gemm.log" || status=1
exit $status
