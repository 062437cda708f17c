#!/usr/bin/env bash
# Nsight Compute on one launch of each prologue format at M = 38592 (run on the GPU machine,
# from the tree): DRAM throughput, achieved occupancy and the warp-stall breakdown, to tell a
# latency-bound row pipeline from a bandwidth- or issue-bound one.
#   OUT=out [CODES="2"] [NCU_EXTRA="--section SourceCounters"] bash scripts/profile_prologue.sh
set -u -o pipefail
OUT=${OUT:-out}
mkdir -p "$OUT"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 H3CUPY_CACHE_DIR=$PWD/.h3cache
for code in ${CODES:-0 1 2}; do  # the kOut template argument: 0 bf16, 1 fp8, 2 nvfp4
  ncu --kernel-name-base mangled --kernel-name "regex:prologue_smxxILi5376ELi${code}E" \
      --launch-skip 2 --launch-count 1 \
      --section SpeedOfLight --section Occupancy --section WarpStateStats \
      --section SchedulerStats --section MemoryWorkloadAnalysis ${NCU_EXTRA:-} \
      python3 benchmarks/prologue.py --m 38592 --reps 2 --no-torch
done 2>&1 | tee "$OUT/ncu_prologue.txt"
