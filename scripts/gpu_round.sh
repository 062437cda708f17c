#!/usr/bin/env bash
# The GPU round, from the tree with nothing installed (PYTHONPATH=.): tests, sanitizers, the
# self-test table and the benchmarks, writing logs and JSON under an output folder. Every stage
# has a timeout, so a hung kernel costs minutes, not the whole call; every mode fits one 10-minute
# device call.
#
#   OUT=/some/dir bash scripts/gpu_round.sh [MODE]
#
# MODE (default: tests)
#   tests       the whole GPU suite (every test file, ping-pong variants included) in 8 pytest-xdist
#               workers; ~5-6 minutes on an H100 / H200
#   memcheck    compute-sanitizer: memcheck of every GEMM path, memcheck and synccheck of the
#               operators' default launches, the FP8 pre-attention's single launch, the ops'
#               clusters of two and FC1's opt-in single launch (scripts/memcheck_ops.py); ~95 s
#               on an H100
#   selftest    the self-test table (every operator that runs on this card); ~50 s on an H100
#   quick       the GPU tests of the host-side paths, which need no long references: the
#               operators' error tests, torch / CuPy interop, CUDA-graph capture, the wheel (skipped
#               where pip has no package index, as on the lent machines), the compile reports,
#               operands on another GPU (skipped on one GPU); ~35 s on an H100
#   auto        h200 on an H200; on any other card quick, then bench (for a call that names
#               nvidia-h200 and may get an H100); run it as h200 is run (GPU_ROUND_TAR)
#   bars        the issues' speed bars on this card: the BF16 pre-attention and the FP8 ops (both
#               cluster sizes) at every production centre against their chains, the NVFP4 ops,
#               scripts/bars.py's verdict; ~4 minutes
#   h200        on an H200 only (the bars are stated for it; elsewhere nothing runs): the MLP's
#               cluster sizes at 19296 / 38592, bars, the BF16 op's second run, the out_proj's
#               cluster sizes at 4824 / 9648; ~6 minutes and more files than a device call
#               returns, so run it as
#                 GPU_ROUND_TAR=$OUT/r.tgz OUT=/tmp/r bash scripts/gpu_round.sh h200
#               (the tarball is rewritten after every stage)
#   h200-short  on an H200 only: the MLP's cluster sizes at 19296 / 38592, then the bars'
#               benchmarks without the NVFP4 ops; ~4 minutes
#   clusters    the MLP at every centre and the out_proj at 4824 / 9648 with both cluster sizes
#   nvfp4       the NVFP4 ops (Hopper path) at every centre against their chains
#   nvfp4-out-proj  the NVFP4 out_proj's GPU tests (single- and two-launch forms), memcheck and
#               synccheck of both, and the op against its two-launch form and chains; ~5 minutes
#   decode-ab   the NVFP4 codecs (sessions 46-47): the GPU tests of everything that decodes or
#               encodes NVFP4 (the codec probe, the dequantization and quantization launches, the
#               weight helpers, both NVFP4 out_proj forms, the NVFP4 pre-attention and GEMM),
#               memcheck and synccheck of the out_proj's two forms, then the NVFP4 ops (30
#               replays per form) and the two launches (benchmarks/dequant.py) timed in this tree
#               and in an earlier one, twice in turn.
#               Needs the earlier tree in .abtree/ (`git archive REV | tar -x -C .abtree`, its
#               modules prebuilt into .h3cache from there, both carried); ~3.5 minutes on an
#               H100 (session 46: 201 s)
#   decode-ab-short  decode-ab for a short lease: its tests, the two launches
#               (benchmarks/dequant.py) in this tree and in .abtree/ once, the NVFP4 out_proj in this
#               tree; no sanitizers; ~2 minutes (H100, session 48: 128 s)
#   first-group the NVFP4 out_proj's single launch with groups of 4 M-tile pairs and a first group
#               of 3 then 4 (probe_fused.py variants g4 / fg3g4) at every centre; ~2 minutes
#   nvfp4-tests the NVFP4 selection of the GPU tests (both ops on both back ends and both out_proj
#               forms, the codec probe, the dequantization and the NVFP4 GEMM), then memcheck and
#               synccheck of both ops' Hopper paths (memcheck_ops.py --nvfp4); ~3 minutes
#   probe-nvfp4 the NVFP4 out_proj's single launch against its bare GEMM launch with timing-only
#               builds (the a' stores dropped; only the consumers' first round; no tile waits) and
#               the probe counters, at M = 4824 / 9648 / 38592 (scripts/probe_fused.py --op nvfp4)
#   order       the replay order's carryover: the BF16 op at P = 1 in shuffled and balanced order
#   cublas      the kernels cuBLAS runs for the baselines on this card (torch profiler)
#   tail        the FP8 pre-attention's tail-kernel diagnostic: its tests, then
#               scripts/pair_tail_splits.py
#   bench       the prologue, the GEMM engine and the BF16 pre-attention benchmarks
#   bench-ops   the W8A8 and W4A4 operators' benchmarks against their chains
#
# Sessions 4-37 added a mode per device call (s5 ... s37, ~150 of them); benchmarks/NOTES.md cites
# those names. They were removed in session 38 and are in git: `git show
# 1011c46:scripts/gpu_round.sh`.
#
# GPU_ROUND_TAR=FILE: after every stage, $OUT is tarred into FILE (for device calls that may be cut
# short, and for $OUT folders with more files than a call returns).
#
# The NVRTC disk cache lives in .h3cache/ (ignored by git). Fill it on the CPU machine with the
# device's NVRTC (`python -m h3cupy.prebuild --arch sm_90a`, README) and carry it to the
# device; unless it was carried, its tarball is written to $OUT so a later round can start warm
# (restore it with `tar xf h3cache.tar`).
set -u -o pipefail
OUT=${OUT:-out}
MODE=${1:-tests}
mkdir -p "$OUT"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 H3CUPY_CACHE_DIR=$PWD/.h3cache H3CUPY_TEST_PINGPONG=1
# a carried cache needs no tarball back (the device returns at most 8 files per call)
carried=0
[ -d .h3cache ] && carried=1
[ -f "$OUT/../h3cache.tar" ] && tar xf "$OUT/../h3cache.tar"
{ nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv
  python3 -c 'import cupy, torch, numpy, ml_dtypes; print("cupy", cupy.__version__, "torch", torch.__version__, "numpy", numpy.__version__, "ml_dtypes", ml_dtypes.__version__)'
} 2>&1 | tee "$OUT/env.txt"

status=0
run() {  # run SECONDS LOGFILE CMD...: a stage with a timeout, appending to LOGFILE; then, when
         # GPU_ROUND_TAR names a file, $OUT tarred into it (a call cut short by the device's lease
         # returns only what it had written, so each finished stage is in the tarball)
  local secs=$1 log=$2
  shift 2
  local t0=$SECONDS
  echo "== $*" | tee -a "$log"
  timeout "$secs" "$@" 2>&1 | tee -a "$log" || { echo "== FAILED or TIMED OUT ($secs s): $*" | tee -a "$log"; status=1; }
  echo "== $((SECONDS - t0)) s" | tee -a "$log"
  snapshot
}
snapshot() {  # $OUT into $GPU_ROUND_TAR when it is set (written aside, then renamed)
  if [ -n "${GPU_ROUND_TAR:-}" ]; then
    tar czf "$GPU_ROUND_TAR.part" -C "$(dirname "$OUT")" "$(basename "$OUT")" && mv "$GPU_ROUND_TAR.part" "$GPU_ROUND_TAR"
  fi
}
PYTEST=(python3 -m pytest -q -rs -p no:cacheprovider)
smi_start() {  # SM clock, power, temperature and throttle reasons every 250 ms to $OUT/smi.csv
  nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu,clocks_throttle_reasons.active \
    --format=csv -lms 250 > "$OUT/smi.csv" 2>&1 &
  smi=$!
}
smi_stop() { kill "$smi"; }
is_h200() { nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; }
suite_xdist() {  # the tests' time is mostly their NumPy references on the host (16 cores there):
                 # 8 workers of two BLAS threads each, every test file in one stage
  run 500 "$OUT/tests.log" env OMP_NUM_THREADS=2 OPENBLAS_NUM_THREADS=2 MKL_NUM_THREADS=2 \
    "${PYTEST[@]}" -n 8 --durations=15 tests
}
sanitizers() {  # memcheck of every GEMM path; memcheck and synccheck of the operators' default
                # launches (scripts/memcheck_ops.py: M = 3000, where the spare producer warps
                # write rows too), the FP8 pre-attention's single launch (--fp8), the ops'
                # clusters of two (--clusters, M = 2900) and FC1's opt-in single launch (--mlp)
  run 120 "$OUT/memcheck.log" compute-sanitizer --tool memcheck --report-api-errors no \
    --error-exitcode 3 python3 scripts/memcheck_gemm.py
  for flag in "" --fp8 --clusters --mlp; do
    for tool in memcheck synccheck; do
      run 150 "$OUT/memcheck.log" compute-sanitizer --tool $tool --report-api-errors no \
        --error-exitcode 3 python3 scripts/memcheck_ops.py $flag
    done
  done
}
bars_once() {  # the BF16 op and the FP8 ops (both cluster sizes) at every centre against their
               # chains, 32 / 30 timed replays per form (at 10, two forms running the same kernels
               # read 4-8% apart on an H100: NOTES, session 34), then scripts/bars.py's verdict
  smi_start
  bf16_run "$OUT/bench_pre_attention.json"
  run 240 "$OUT/bench.log" python3 benchmarks/ops_fp8.py --reps 30 --other-cluster \
    --json "$OUT/bench_ops_fp8.json"
  smi_stop
  python3 scripts/bars.py --pre "$OUT/bench_pre_attention.json" --ops "$OUT/bench_ops_fp8.json" \
    2>&1 | tee -a "$OUT/bench.log"
}
bf16_run() {  # bf16_run JSON: the BF16 op at every centre against its chains, 32 replays per form
  run 120 "$OUT/bench.log" python3 benchmarks/pre_attention.py --p 8 4 2 1 --reps 32 --json "$1"
}
bf16_second_run() {  # issue #4's second run of the BF16 op, and scripts/bars.py's verdict on it
  bf16_run "$OUT/bench_pre_attention_2.json"
  python3 scripts/bars.py --pre "$OUT/bench_pre_attention_2.json" 2>&1 | tee -a "$OUT/bench.log"
}
cluster_settings() {  # the MLP at every centre and the out_proj at 4824 / 9648 with the other
                     # cluster size too (the MLP also with FC1's single launch), 40 timed replays
                     # per form, graph replays only
  run 300 "$OUT/bench.log" python3 benchmarks/ops_fp8.py --ops mlp --reps 40 --no-compile \
    --other-cluster --json "$OUT/bench_mlp.json"
  out_proj_clusters
}
out_proj_clusters() {  # the out_proj at 4824 / 9648 with both cluster sizes, 40 replays per form
  run 90 "$OUT/bench.log" python3 benchmarks/ops_fp8.py --ops out_proj --m 4824 9648 \
    --reps 40 --no-compile --other-cluster --json "$OUT/bench_out_proj.json"
}
mlp_large_clusters() {  # the MLP at 19296 / 38592 with both cluster sizes, 40 timed replays per
                       # form: whether gemm.FP8_OPS_CLUSTER2_FROM_M (16384, chosen on H100s) needs a
                       # per-card value for the MLP (an H200 read single CTAs 3.5 / 1.2% faster
                       # once, NOTES session 33); ~1 minute
  run 150 "$OUT/bench.log" python3 benchmarks/ops_fp8.py --ops mlp --m 19296 38592 --reps 40 \
    --no-compile --other-cluster --json "$OUT/bench_mlp_large.json"
}
nvfp4_ops() {  # the NVFP4 ops (Hopper path) at every centre against their chains
  run 120 "$OUT/bench.log" python3 benchmarks/ops_fp8.py --ops nvfp4_pre_attention \
    nvfp4_out_proj --reps 10 --json "$OUT/bench_nvfp4.json"
}
nvfp4_out_proj_round() {  # the NVFP4 out_proj's single launch (session 45): its GPU tests (both
                         # forms, the emulation too), memcheck and synccheck of both forms
                         # (memcheck_ops.py --nvfp4), then the op against its two-launch form and
                         # its chains at every centre, 20 timed replays per form; ~5 minutes
  run 300 "$OUT/tests.log" env OMP_NUM_THREADS=2 "${PYTEST[@]}" -n 8 \
    tests/test_out_proj_gpu.py -k "nvfp4"
  nvfp4_sanitizers
  run 200 "$OUT/bench.log" python3 benchmarks/ops_fp8.py --ops nvfp4_out_proj --reps 20 \
    --json "$OUT/bench_nvfp4_out_proj.json"
}
nvfp4_sanitizers() {  # memcheck and synccheck of the NVFP4 ops' Hopper forms
  for tool in memcheck synccheck; do
    run 150 "$OUT/memcheck.log" compute-sanitizer --tool $tool --report-api-errors no \
      --error-exitcode 3 python3 scripts/memcheck_ops.py --nvfp4
  done
}
quick_tests() {  # the GPU tests of the host-side paths (see the mode list above)
  run 300 "$OUT/tests.log" env OMP_NUM_THREADS=2 "${PYTEST[@]}" -n 8 tests/test_out_proj_gpu.py \
    tests/test_packaging.py tests/test_jit.py tests/test_errors.py tests/test_interop_gpu.py \
    tests/test_multi_gpu.py -k \
    "errors or packaging or wheel or installed or (sm_89 and prologue) or interop or multi or operand or torch or graph"
}
h200_round() {  # the H200's figure set: the issues' bars, the NVFP4 ops, the cluster settings
  mlp_large_clusters
  bars_once
  nvfp4_ops
  bf16_second_run
  out_proj_clusters
}
bench_round() {  # the prologue, the GEMM engine and the BF16 pre-attention benchmarks
  run 100 "$OUT/bench.log" python3 benchmarks/prologue.py --json "$OUT/bench_prologue.json"
  run 240 "$OUT/bench.log" python3 benchmarks/gemm.py --m 129 4824 38592 \
    --backend wgmma wgmma128x2pp wgmma192p3x2 mma_tma --json "$OUT/bench_gemm.json"
  run 200 "$OUT/bench.log" python3 benchmarks/pre_attention.py --json "$OUT/bench_pre_attention.json"
}
not_h200() { echo "== not an H200 ($(nvidia-smi --query-gpu=name --format=csv,noheader)): nothing run"; }

# the GPU tests of everything that encodes or decodes NVFP4 (decode-ab, decode-ab-short)
nvfp4_codec_tests() {
  run 300 "$OUT/tests.log" env OMP_NUM_THREADS=2 "${PYTEST[@]}" -n 8 tests/test_codec_gpu.py \
    tests/test_out_proj_gpu.py tests/test_gemm_gpu.py tests/test_weights_gpu.py \
    tests/test_pre_attention_gpu.py tests/test_prologue_gpu.py \
    -k "nvfp4 or codec or fp4_quantize or weight_helpers"
}

case "$MODE" in
  tests)
    suite_xdist
    ;;
  memcheck)
    sanitizers
    ;;
  selftest)
    run 540 "$OUT/selftest.log" python3 -m h3cupy.selftest --quick
    ;;
  bars)
    bars_once
    nvfp4_ops
    ;;
  h200)
    if is_h200; then h200_round; else not_h200; fi
    ;;
  quick)
    quick_tests
    ;;
  auto)
    if is_h200; then h200_round; else quick_tests; bench_round; fi
    ;;
  h200-short)
    if is_h200; then mlp_large_clusters; bars_once; else not_h200; fi
    ;;
  clusters)
    cluster_settings
    ;;
  nvfp4)
    nvfp4_ops
    ;;
  nvfp4-out-proj)
    nvfp4_out_proj_round
    ;;
  decode-ab)
    nvfp4_codec_tests
    nvfp4_sanitizers
    for i in 1 2; do
      for tree in new old; do
        root=$PWD
        [ $tree = old ] && root=$PWD/.abtree
        run 90 "$OUT/bench.log" env PYTHONPATH="$root" python3 "$root/benchmarks/ops_fp8.py" \
          --ops nvfp4_out_proj --reps 30 --no-compile --json "$OUT/ab_${tree}_$i.json"
        # (two centres: the pre-attention's emulation form is slow, and w' does not depend on M)
        run 90 "$OUT/bench.log" env PYTHONPATH="$root" python3 "$root/benchmarks/ops_fp8.py" \
          --ops nvfp4_pre_attention --m 4824 9648 --reps 30 --no-compile \
          --json "$OUT/ab_pre_${tree}_$i.json"
        run 60 "$OUT/bench.log" env PYTHONPATH="$root" python3 benchmarks/dequant.py \
          --json "$OUT/dequant_${tree}_$i.json"
      done
    done
    ;;
  decode-ab-short)
    nvfp4_codec_tests
    for tree in new old; do
      root=$PWD
      [ $tree = old ] && root=$PWD/.abtree
      run 60 "$OUT/bench.log" env PYTHONPATH="$root" python3 benchmarks/dequant.py \
        --json "$OUT/dequant_${tree}_1.json"
    done
    run 90 "$OUT/bench.log" python3 benchmarks/ops_fp8.py --ops nvfp4_out_proj --reps 30 \
      --no-compile --json "$OUT/ab_new_1.json"
    ;;
  probe-nvfp4)
    # where the NVFP4 single launch's cost over its bare GEMM goes (scripts/probe_fused.py --op
    # nvfp4; its builds prebuilt into .h3cache with the same --prebuild sm_90a line, or ~75 s here)
    run 300 "$OUT/bench.log" python3 scripts/probe_fused.py --op nvfp4 --m 4824 9648 38592 \
      --reps 20 --variant noaprime=H3_FUSED_NOAPRIME idle=H3_FUSED_IDLESPARE,H3_FUSED_NOPOLL \
      nopoll=H3_FUSED_NOPOLL --json "$OUT/probe_nvfp4.json"
    ;;
  nvfp4-tests)
    run 300 "$OUT/tests.log" env OMP_NUM_THREADS=2 "${PYTEST[@]}" -n 8 \
      tests/test_codec_gpu.py tests/test_out_proj_gpu.py tests/test_pre_attention_gpu.py \
      tests/test_gemm_gpu.py -k "nvfp4"
    nvfp4_sanitizers
    ;;
  first-group)
    # the NVFP4 single launch (a' form) with smaller tile groups (NOTES, session 50's prediction):
    # groups of 4 M-tile pairs, a first group of 3 then 4, and the spare warps idle (no tile
    # waits) against the default order; the builds prebuilt with the same line plus
    # --prebuild sm_90a; ~2 minutes
    run 300 "$OUT/bench.log" python3 scripts/probe_fused.py --op nvfp4 --m 4824 9648 19296 38592 \
      --reps 20 --variant g4=H3_GROUP_M=4 fg3g4=H3_FIRST_GROUP_M=3,H3_GROUP_M=4 \
      idle=H3_FUSED_IDLESPARE,H3_FUSED_NOPOLL --json "$OUT/probe_fg.json"
    ;;
  order)
    for i in 1 2; do
      run 120 "$OUT/bench.log" python3 benchmarks/pre_attention.py --p 1 --reps 20 --order shuffle \
        --json "$OUT/order_shuffle_$i.json"
      run 120 "$OUT/bench.log" python3 benchmarks/pre_attention.py --p 1 --reps 16 \
        --order balanced --json "$OUT/order_balanced_$i.json"
    done
    ;;
  cublas)
    run 60 "$OUT/bench.log" python3 scripts/cublas_kernels.py --json "$OUT/cublas_kernels.json"
    ;;
  tail)
    run 150 "$OUT/tests.log" "${PYTEST[@]}" tests/test_pre_attention_gpu.py -k \
      "tail_kernel_one_range or test_fp8_pre_attention_pair_tail_split_elsewhere"
    run 180 "$OUT/bench.log" python3 scripts/pair_tail_splits.py --json "$OUT/pair_tail_splits.json"
    ;;
  bench)
    bench_round
    ;;
  bench-ops)
    run 330 "$OUT/bench.log" python3 benchmarks/ops_fp8.py --json "$OUT/bench_ops_fp8.json"
    run 240 "$OUT/bench.log" python3 benchmarks/ops_fp8.py --ops nvfp4_pre_attention \
      nvfp4_out_proj --json "$OUT/bench_ops_nvfp4.json"
    ;;
  *)
    echo "mode: expected tests, memcheck, selftest, quick, auto, bars, h200, h200-short, clusters, nvfp4,"
    echo "nvfp4-out-proj, decode-ab, order,"
    echo "cublas, tail, bench or bench-ops; got '$MODE'. The session modes (s5 ... s37) are in"
    echo "git: git show 1011c46:scripts/gpu_round.sh"
    exit 2
    ;;
esac
[ "$carried" = 1 ] || tar cf "$OUT/h3cache.tar" .h3cache 2>/dev/null
snapshot  # what ran after the last stage (bars.py's verdicts)
exit $status
