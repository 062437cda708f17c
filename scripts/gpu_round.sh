#!/usr/bin/env bash
# The whole GPU round, from the tree with nothing installed (PYTHONPATH=.): GPU tests, the
# self-test table and the benchmarks, writing logs and JSON to an output folder. Every stage has
# a timeout, so a hung kernel costs minutes, not the whole call.
#
#   OUT=/some/dir bash scripts/gpu_round.sh [tests|s37|s36-bars|s36|s35-last|s35-split|s35-h200|s34-h200b|s34-auto|s34-a|s33-mlp|s33-b|s33-order|s33-auto|s33-suite|s32-f|s32-e|s32-d|s32-c|s32-h200b|s32-h200|s32-b|s32-auto|s32-a|s31-g|s31-f|s31-e|s31-d|s31-c|s31-a|s30-f|s30-c|s30-d|s28-b|s27-g|s27-f|s27-e|s26-f|s26-c|s26-b|s26-a|s25-a|s25-b|s25-c|s25-d|s24-a|s23-c|s23-b|s23-a|s22-g|s22-f|s22-e|s22-d|s22-c|s22-b|s22-a|s21-h|s21-g|s21-f|s21-e|s21-d|s21-c|s21-b|s20-e|s20-c|s20-b|s19-e|s19-d|s19-c|s19-a|s19-desc|s18-f|s18-c|s18-a|s17-f|s16-d|s16-a|s16-b|s15-f|s15-e|s15-a|s14-g|s14-f|s14-e|s14-d|s14-b|s14-a|s14-first|s13-probe|s13-ab|s13-final|s13-n192|s12-e|s12-c|s12-b|s12-a|s12-split|s11-check|s11-final|s11-final-b|s11-final-c|s11-x1|s11-waits|s10-stage5p|s10-stage5|s10-ab|s10-epi2|s10-epi|s10-probe|s10-a|s10-order|s9-energy|s9-review|s9-pre|s9-final|s9-tail|s9-ws|s8-review|s8-review-mlp|s8-final|s8-tail|s8-gated|s7-final|s7-fused|s7-fair|s7-probe|s7-probe2|s6-ab|s6-bf16|s6-tests|s6-final|s6-nv224|promo|ops-check|prefetch|final|final-check|m192|s5|s5-final|s5-probe|swapab|new|new-mlp|new-ops|selftest|bench|bench-ops]
#
# tests (default): the foundation, engine and BF16-op GPU tests (ping-pong included), memcheck.
# selftest: the self-test table.
# promo: the FP8 promotion modes and the bf16 tile widths, benchmarked and tested; ops-check:
# the FP8 operators' main tests and their benchmark; prefetch: the gated residual's TMA
# prefetch and the bf16 small-M clusters, tested and timed; final: the FC1 division and the
# operators at every centre; final-check: the last code's remaining coverage; m192: the FP8
# pre-attention on 192-row tiles against 128, and the BF16 pre-attention benchmark.
# new / new-mlp: the mma.sync-back-end, NVFP4 and graph tests of the quantized ops; new-ops: the
# quantized operators' tests.
# bench / bench-ops: the benchmarks (engine and BF16 op / the W8A8 ops).
# The NVRTC disk cache lives in .h3cache/ (ignored by git); unless it was carried, its tarball is
# written to $OUT so a later round can start warm (restore it with: tar xf h3cache.tar). Or fill it on the CPU machine
# with the device's NVRTC (scripts/prebuild_cache.py) and carry .h3cache to the device.
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
run() {  # run SECONDS LOGFILE CMD...: a stage with a timeout, appending to LOGFILE
  local secs=$1 log=$2
  shift 2
  local t0=$SECONDS
  echo "== $*" | tee -a "$log"
  timeout "$secs" "$@" 2>&1 | tee -a "$log" || { echo "== FAILED or TIMED OUT ($secs s): $*" | tee -a "$log"; status=1; }
  echo "== $((SECONDS - t0)) s" | tee -a "$log"
}
PYTEST=(python3 -m pytest -q -rs -p no:cacheprovider)
smi_start() {  # SM clock, power, temperature and throttle reasons every 250 ms to $OUT/smi.csv
  nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu,clocks_throttle_reasons.active \
    --format=csv -lms 250 > "$OUT/smi.csv" 2>&1 &
  smi=$!
}
smi_stop() { kill "$smi"; }
s10_measure() {  # session 10's epilogue measurements: the engine probe, the FP8 out_proj and MLP
                 # against torch.compile, the FP8 engine against _scaled_mm (clock logged)
  smi_start
  run 60 "$OUT/probe.log" python3 scripts/probe_engine.py --m 4824 --reps 5 --json "$OUT/probe_engine.json"
  run 150 "$OUT/bench.log" python3 benchmarks/ops_fp8.py --ops out_proj mlp --m 4824 9648 19296 38592 \
    --json "$OUT/bench_ops.json"
  run 50 "$OUT/bench.log" python3 benchmarks/gemm.py --fmt e4m3 --shapes o fc2 qkv fc1 --m 4824 9648 \
    --backend wgmma --reps 10 --json "$OUT/bench_gemm_fp8.json"
  smi_stop
}
rope_operand_abs() {  # session 27: what the RoPE operands' load latency costs the pre-attention
                      # epilogues (pacs0), and their L1 prefetch before each unit's mainloop
                      # (paprefetch); s27-g, s28-b
  for ab in pacs0 paprefetch; do
    run 150 "$OUT/ab.log" python3 scripts/probe_engine.py --ab $ab --m 4824 38592 --reps 10 \
      --json "$OUT/ab_$ab.json"
  done
}
pre_attention_benches() {  # session 30: both pre-attention ops at every centre (issues #4 and
                           # #5), 20 / 10 rounds; s30-f, s31-a
  run 200 "$OUT/bench.log" python3 benchmarks/pre_attention.py --p 8 4 2 1 --reps 20 \
    --json "$OUT/bench_pre_attention.json"
  run 200 "$OUT/bench.log" python3 benchmarks/ops_fp8.py --ops pre_attention --reps 10 \
    --json "$OUT/bench_ops_fp8.json"
}
engine_ops_tests() {  # sessions 20-21: after an engine change, its own tests (tail splits,
                      # variants, 192-row tiles) and the FP8 out_proj's and MLP's
  run 130 "$OUT/tests.log" "${PYTEST[@]}" --durations=5 tests/test_gemm_gpu.py -k \
    "test_gemm_wgmma_tail_split or (test_gemm_bf16 and wgmma) or (e4m3_scaled and wgmma) or \
    (test_gemm_wgmma_variants and 2000x2560) or (test_gemm_wgmma_m192 and 2000x2560)"
  run 110 "$OUT/tests.log" "${PYTEST[@]}" --durations=5 tests/test_out_proj_gpu.py \
    tests/test_mlp_gpu.py -k "test_fp8_out_proj[4824-int32] or nan_rows[fused] or \
    test_fp8_out_proj_tail_split or test_mlp_fp8[257] or test_mlp_fp8[4824]"
}
smoke_then_tests() {  # smoke_then_tests SMOKE FULL FLAG (session 26): the pre-attention tests
                      # -k SMOKE (one test, 150 s); only if it passed, those -k FULL and
                      # scripts/memcheck_ops.py FLAG under memcheck and synccheck; fails if the
                      # smoke test did
  if timeout 150 "${PYTEST[@]}" tests/test_pre_attention_gpu.py -k "$1" >> "$OUT/tests.log" 2>&1
  then
    run 240 "$OUT/tests.log" "${PYTEST[@]}" --durations=5 tests/test_pre_attention_gpu.py -k "$2"
    for tool in memcheck synccheck; do
      run 150 "$OUT/memcheck.log" compute-sanitizer --tool $tool --report-api-errors no \
        --error-exitcode 3 python3 scripts/memcheck_ops.py "$3"
    done
  else
    echo "== the smoke test failed: see tests.log" | tee -a "$OUT/tests.log"
    status=1
    return 1
  fi
}
is_h200() { nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; }
h200_bars() {  # session 32, for an H200 (where every bar is stated): the BF16 pre-attention at
               # every centre against its chains (issue #4), the FP8 ops at every centre, also
               # with the other cluster size (#5-#7), the BF16 op a second time (#4 needs two
               # runs), the kernels cuBLAS runs for the baselines on this card (s32-h200b has the
               # sustained figures)
  echo "== H200: the bars" | tee -a "$OUT/bench.log"
  bars_once
  smi_start
  bf16_second_run
  smi_stop
  run 60 "$OUT/bench.log" python3 scripts/cublas_kernels.py --json "$OUT/cublas_kernels.json"
}
bf16_second_run() {  # issue #4's second run of the BF16 op at every centre (32 replays), and
                     # scripts/bars.py's verdict on it
  run 120 "$OUT/bench.log" python3 benchmarks/pre_attention.py --p 8 4 2 1 --reps 32 \
    --json "$OUT/bench_pre_attention_2.json"
  python3 scripts/bars.py --pre "$OUT/bench_pre_attention_2.json" 2>&1 | tee -a "$OUT/bench.log"
}
tail_splits() {  # session 35: the FP8 pre-attention's pairs' tail split by its split count
  run 180 "$OUT/bench.log" python3 scripts/pair_tail_splits.py --json "$OUT/pair_tail_splits.json"
}
tail_kernel_tests() {  # sessions 36-37: the tail kernel with one k-range (its test: the reference
                      # and the two launches' bytes) and the split's bits outside its pairs
  run 150 "$OUT/tests.log" "${PYTEST[@]}" tests/test_pre_attention_gpu.py -k \
    "tail_kernel_one_range or test_fp8_pre_attention_pair_tail_split_elsewhere"
}
bars_once() {  # session 32: the BF16 op and the FP8 ops with both cluster sizes at every centre
               # against their chains, then scripts/bars.py's verdict on them. Session 34: 32 / 30
               # timed replays per form (were 16 / 10: at 10, two MLP forms running the same
               # kernels read 4-8% apart on an H100, s34-auto)
  smi_start
  run 120 "$OUT/bench.log" python3 benchmarks/pre_attention.py --p 8 4 2 1 --reps 32 \
    --json "$OUT/bench_pre_attention.json"
  run 240 "$OUT/bench.log" python3 benchmarks/ops_fp8.py --reps 30 --other-cluster \
    --json "$OUT/bench_ops_fp8.json"
  smi_stop
  python3 scripts/bars.py --pre "$OUT/bench_pre_attention.json" --ops "$OUT/bench_ops_fp8.json" \
    2>&1 | tee -a "$OUT/bench.log"
}
suite_xdist() {  # session 33: the whole GPU suite in 8 pytest-xdist workers (the tests' time is
                # mostly their numpy references on the host: 16 cores there), two BLAS threads
                # each; every test file, ping-pong included, in one stage of at most 500 s
  run 500 "$OUT/tests.log" env OMP_NUM_THREADS=2 OPENBLAS_NUM_THREADS=2 MKL_NUM_THREADS=2 \
    "${PYTEST[@]}" -n 8 --durations=15 tests
}
cluster_settings() {  # session 34: the MLP at every centre and the out_proj at 4824 / 9648 with
                     # the other cluster size too (the MLP also with FC1's single launch), 40
                     # timed replays per form, graph replays only
  run 300 "$OUT/bench.log" python3 benchmarks/ops_fp8.py --ops mlp --reps 40 --no-compile \
    --other-cluster --json "$OUT/bench_mlp.json"
  run 90 "$OUT/bench.log" python3 benchmarks/ops_fp8.py --ops out_proj --m 4824 9648 \
    --reps 40 --no-compile --other-cluster --json "$OUT/bench_out_proj.json"
}
nvfp4_ops() {  # session 34: the NVFP4 ops (Hopper path) at every centre against their chains
  run 120 "$OUT/bench.log" python3 benchmarks/ops_fp8.py --ops nvfp4_pre_attention \
    nvfp4_out_proj --reps 10 --json "$OUT/bench_nvfp4.json"
}
# Each mode fits in one device call (10 minutes).
case "$MODE" in
  s37)  # session 37, whichever card: on an H200 s35-h200 first (~5.5 minutes); then, on any
        # card, the tail kernel's test (now also against the reference) and its neighbour
    if is_h200; then bash "$0" s35-h200 || status=1; fi
    tail_kernel_tests
    ;;
  s36-bars)  # session 36, for an H200 only (nothing elsewhere): the bars alone (bars_once, ~3
             # minutes), for a call with too little device time left for s35-h200
    if is_h200; then bars_once; else echo "== not an H200: nothing run"; fi
    ;;
  s36|s35-split)  # sessions 35-36, whichever card: on an H200 s35-h200 first (the bars, cluster
                  # settings, NVFP4, the BF16 op's second run); then, on any card, the tail kernel
                  # with one k-range against the two launches' bytes (its test, session 36) and
                  # scripts/pair_tail_splits.py (the pairs' tail split by split count)
    if is_h200; then bash "$0" s35-h200 || status=1; fi
    tail_kernel_tests
    tail_splits
    ;;
  s35-last)  # session 35's last call (~6 minutes of device time left): on an H200 the bars only
             # (bars_once, ~3 minutes); then, on any card, scripts/pair_tail_splits.py
    bash "$0" s36-bars || status=1
    tail_splits
    ;;
  s35-h200)  # session 35, for an H200 only (nothing elsewhere): s34-h200b, then the BF16 op's
             # second run at 32 replays (issue #4's two runs); ~5.5 minutes, ten files (run it
             # with OUT=/tmp/r and tar /tmp/r into $OUT)
    if is_h200; then
      bash "$0" s34-h200b || status=1
      bf16_second_run
    else
      echo "== not an H200: nothing run"
    fi
    ;;
  s34-h200b)  # session 34, for an H200 only (nothing elsewhere): bars_once (the bars at 32 / 30
              # replays per form), the MLP's and the out_proj's cluster settings at 40 replays
              # (graph replays only), the NVFP4 ops; ~4 minutes. Nine files: more than a device
              # call returns, so run it with OUT=/tmp/r and tar /tmp/r into $OUT.
              # (The session's s34-h200 and s34-h200c, subsets of this that never ran, are folded
              # into it.)
    if is_h200; then
      bars_once
      cluster_settings
      nvfp4_ops
    else
      echo "== not an H200: nothing run"
    fi
    ;;
  s34-auto)  # session 34, whichever card comes: on an H200, s34-h200b; on any other card, the
             # bars' benchmarks as one figure set for that card (bars_once) and the NVFP4 ops
    if is_h200; then bash "$0" s34-h200b; exit $?; fi
    bars_once
    nvfp4_ops
    ;;
  s34-a)  # session 34, whichever card: the MLP's open settings (clusters of two from M = 16384,
          # FC1's single launch on single CTAs) and the out_proj's clusters at 4824 / 9648
          # (threshold 16384), 40 timed replays per form (the identical forms h3 /
          # h3_fc1_one_launch at 19296 / 38592 read 2.3 / 3.7% apart at 20 in s33-b); the MLP
          # also sustained
    smi_start
    cluster_settings
    run 200 "$OUT/bench.log" python3 benchmarks/ops_fp8.py --ops mlp --m 4824 38592 --reps 10 \
      --no-compile --other-cluster --energy --json "$OUT/bench_mlp_energy.json"
    smi_stop
    ;;
  s33-auto)  # session 33: whichever card comes. On an H200 (where every bar is stated):
             # h200_bars (then s33-suite on the same warm machine). On any other card: the whole
             # GPU suite at HEAD (suite_xdist)
    if is_h200; then
      h200_bars
    else
      echo "== not an H200: the whole GPU suite" | tee -a "$OUT/tests.log"
      suite_xdist
    fi
    ;;
  s33-mlp)  # session 33, for an H200 only (nothing elsewhere): the MLP's clusters of two from
            # M = 16384 (gemm.FP8_OPS_CLUSTER2_FROM_M, chosen on H100s in session 31) read 3.5% /
            # 1.2% slower than single CTAs at 19296 / 38592 in s33-b; once more, then sustained (--energy)
    if is_h200; then
      run 120 "$OUT/bench.log" python3 benchmarks/ops_fp8.py --ops mlp --m 19296 38592 \
        --reps 24 --no-compile --other-cluster --json "$OUT/bench_mlp_cluster_1.json"
      run 150 "$OUT/bench.log" python3 benchmarks/ops_fp8.py --ops mlp --m 19296 38592 \
        --reps 10 --no-compile --other-cluster --energy --json "$OUT/bench_mlp_cluster_2.json"
      # the out_proj at 9648, where s33-b read the clusters (not yet its default there) 1.7%
      # faster: graph replays and sustained
      run 100 "$OUT/bench.log" python3 benchmarks/ops_fp8.py --ops out_proj --m 9648 \
        --reps 24 --no-compile --other-cluster --energy --json "$OUT/bench_out_proj_cluster.json"
    else
      echo "== not an H200: nothing run"
    fi
    ;;
  s33-b)  # session 33: on an H200, h200_bars (the balanced replay order now the default); on any
          # other card, s33-order
    if is_h200; then h200_bars; else bash "$0" s33-order; exit $?; fi
    ;;
  s33-order)  # session 33, whichever card: the replay order's carryover. The BF16 pre-attention
              # benchmark at P = 1 (nine forms, two of them the same kernel: h3 and h3_no_tail)
              # in the former shuffled rounds and in the balanced order, twice each
    for i in 1 2; do
      run 120 "$OUT/bench.log" python3 benchmarks/pre_attention.py --p 1 --reps 20 --order shuffle \
        --json "$OUT/order_shuffle_$i.json"
      run 120 "$OUT/bench.log" python3 benchmarks/pre_attention.py --p 1 --reps 16 \
        --order balanced --json "$OUT/order_balanced_$i.json"
    done
    ;;
  s33-suite)  # session 33: the whole GPU suite at HEAD on whichever card (suite_xdist)
    suite_xdist
    ;;
  s21-b)  # session 21's first call: the engine with the consumers' tile index formed from the
          # tile count, and the BF16 pre-attention loading each row's RoPE operands at its math
          # (no sm_90a kernel spills), now the default: the engine's, out_proj's, MLP's and both
          # pre-attentions' tests (tail splits included), then the A/B against the session-20
          # form (probe_engine.py --ab tiles: -DH3_T_CARRIED; above 1.0 favours the default)
    engine_ops_tests
    run 120 "$OUT/tests.log" "${PYTEST[@]}" --durations=5 tests/test_pre_attention_gpu.py -k \
      "test_bf16_pre_attention[1] or test_bf16_pre_attention[4097 or no_tail_split or \
      test_bf16_pre_attention_graph or (test_bf16_pre_attention_positions and 4097) or \
      test_fp8_pre_attention[4824 or (test_fp8_pre_attention_tile_m192 and 4824 and bf16)"
    run 200 "$OUT/ab.log" python3 scripts/probe_engine.py --ab tiles --m 4824 38592 --reps 10 \
      --energy --json "$OUT/ab_tiles.json"
    ;;
  s22-c)  # session 22: the rest of the out_proj's / MLP's tests that run the staged rows (M =
          # 38592, 149796, the tail split on and off, aliasing, own-scratch captures, the clusters,
          # PDL), then the W8A8 out_proj and MLP against torch.compile on the new default
    run 330 "$OUT/tests.log" "${PYTEST[@]}" --durations=10 tests/test_out_proj_gpu.py \
      tests/test_mlp_gpu.py tests/test_pdl_gpu.py -k "test_fp8_out_proj[38592 or \
      test_fp8_out_proj_tail_split[4824-True-False] or test_fp8_out_proj_tail_split[4097-True \
      or test_fp8_out_proj_other_cluster[4097-True] or test_fp8_out_proj_tail_split_deterministic \
      or test_fp8_out_proj_capture_own_scratch[True] or test_mlp_fp8_largest_m or \
      test_mlp_fp8_out_aliasing or test_mlp_fp8_no_tail_split or test_mlp_fp8_other_cluster[True] \
      or test_mlp_fp8[257] or (test_ops_pdl and (out_proj or mlp))"
    smi_start
    run 230 "$OUT/bench.log" python3 benchmarks/ops_fp8.py --ops out_proj mlp --m 4824 9648 19296 \
      38592 --reps 16 --json "$OUT/bench_ops.json"
    smi_stop
    ;;
  s22-d)  # session 22: where the single-launch out_proj's 5-6% over its GEMM on quantized input
          # goes at M = 4824 / 9648: probe_fused.py's default against the build without the
          # counter waits (-DH3_FUSED_NOPOLL: the first round's consumer quantization and the
          # spare warps' rows, nobody waiting) and without the spare warps' rows as well
          # (+ -DH3_FUSED_IDLESPARE: the first round's quantization alone); timing-only builds
    run 120 "$OUT/probe.log" python3 scripts/probe_fused.py --m 4824 9648 --reps 16 \
      --variant nopoll=H3_FUSED_NOPOLL idle=H3_FUSED_NOPOLL,H3_FUSED_IDLESPARE \
      --json "$OUT/probe_fused.json"
    ;;
  s22-e)  # session 22: s22-d put ~9 us of the single-launch out_proj's cost at M = 4824 in the
          # consumers' first-round quantization (1024 rows before any tile starts): the first
          # group of the tile order with 5 / 6 M-tiles instead of 8 (-DH3_FIRST_GROUP_M), so that
          # the first round reads 640 / 768 rows, the later groups as before; both forms timed
    run 120 "$OUT/probe.log" python3 scripts/probe_fused.py --m 4824 9648 --reps 16 \
      --variant fg5=H3_FIRST_GROUP_M=5 fg6=H3_FIRST_GROUP_M=6 --json "$OUT/probe_fused.json"
    ;;
  s22-f)  # session 22: the spare rows in two halves on two mbarriers, the next row's half copied as
          # soon as the codes pass has left it (-DH3_FUSED_PIPE: the copies' latency hidden, a
          # faster row), alone and with the first tile group of 6 M-tiles that s22-e found the
          # spare rows too slow for (-DH3_FIRST_GROUP_M=6). Ran at 4bef4b4: level (a row 6.7 -> 6.3
          # us), so the pipelined form was removed; run it from that commit
    run 120 "$OUT/probe.log" python3 scripts/probe_fused.py --m 4824 9648 --reps 16 \
      --variant pipe=H3_FUSED_PIPE pipefg6=H3_FUSED_PIPE,H3_FIRST_GROUP_M=6 \
      --json "$OUT/probe_fused.json"
    ;;
  s25-a)  # session 25's first call (sessions 23 and 24 had no GPU): the smoke tests of the BF16
          # single launch (s23-a) and of the FP8 pairs' tail split (s24-a), a minute each; the
          # single-launch FP8 out_proj's tile orders (s23-c, issue #6's fused cost); then the BF16
          # forms' tests (s23-a's selection)
    run 60 "$OUT/tests.log" "${PYTEST[@]}" tests/test_pre_attention_gpu.py \
      -k "test_bf16_pre_attention_fused_prologue_same_bits and 4824"
    run 60 "$OUT/tests.log" "${PYTEST[@]}" tests/test_pre_attention_gpu.py \
      -k "test_fp8_pre_attention_pair_tail_split and 4824 and bf16 and not graph"
    smi_start
    run 150 "$OUT/probe.log" python3 scripts/probe_fused.py --m 4824 9648 --reps 16 \
      --variant g1=H3_GROUP_M=1 g2=H3_GROUP_M=2 fg5g2=H3_FIRST_GROUP_M=5,H3_GROUP_M=2 \
      --json "$OUT/probe_fused.json"
    smi_stop
    run 240 "$OUT/tests.log" "${PYTEST[@]}" --durations=8 tests/test_pre_attention_gpu.py \
      -k "test_bf16_pre_attention and not mma_backend and not (same_bits and 4824)"
    ;;
  s25-b)  # session 25's second call: the BF16 op's benchmark with its two new forms (s23-b, 20
          # rounds) and the FP8 pairs' tail-split tests (s24-a)
    run 120 "$OUT/tests.log" "${PYTEST[@]}" --durations=8 tests/test_pre_attention_gpu.py \
      -k "test_fp8_pre_attention_pair_tail_split and not (4824 and bf16 and not graph)"
    smi_start
    run 380 "$OUT/bench.log" python3 benchmarks/pre_attention.py --p 8 4 2 1 1 --reps 20 \
      --json "$OUT/bench_pre_attention.json"
    smi_stop
    ;;
  s30-c)  # session 30: the packed-word epilogue is the default (the same bytes as before in
          # s30-a's A/B). First the smoke tests (both ops' same-bits and reference tests at 4824),
          # then the BF16 op's benchmark for issue #4 (P = 8 / 4 / 2 / 1, 20 rounds); s30-d has
          # the rest
    run 150 "$OUT/tests.log" "${PYTEST[@]}" tests/test_pre_attention_gpu.py -k \
      "4824 and (same_bits or test_bf16_pre_attention[ or test_fp8_pre_attention[)"
    smi_start
    run 330 "$OUT/bench.log" python3 benchmarks/pre_attention.py --p 8 4 2 1 --reps 20 \
      --json "$OUT/bench_pre_attention.json"
    smi_stop
    ;;
  s32-d)  # session 32 (ran at 7a7b6d4, where -DH3_EPI_OVERLAP and its A/B are; removed after
          # it: the same bytes, 0-3% slower on an H100): the FP8 mode-3 kernels running the next
          # unit's first span under each
          # epilogue (-DH3_EPI_OVERLAP, probe_engine.py --ab overlap: the same bytes checked, then
          # timed; above 1 favours the default) at 4824 / 38592; then a second A/B run, or on an
          # H200 the four ops against their chains
    run 150 "$OUT/bench.log" python3 scripts/probe_engine.py --ab overlap --m 4824 38592 \
      --reps 10 --json "$OUT/ab_overlap_1.json"
    if is_h200; then  # (the BF16 op's second run and the sustained figures: s32-h200b)
      bars_once
    else
      run 150 "$OUT/bench.log" python3 scripts/probe_engine.py --ab overlap --m 4824 38592 \
        --reps 10 --json "$OUT/ab_overlap_2.json"
    fi
    ;;
  s32-c)  # session 32: h200_bars on an H200; on any other card, where the single-launch FP8
          # out_proj's quantization costs 7-10% at every M (H100 runs of sessions 31-32; the
          # H200 read 5.1 / 3.8 / 1.7 / 1.5% in session 22): probe_fused.py's counters at 4824 /
          # 38592 (do tiles wait on the spare rows at large M?) and the staged rows against
          # each spare warp on its own rows (probe_engine.py --ab rows; above 1 favours staged)
    if is_h200; then
      h200_bars
    else
      run 150 "$OUT/bench.log" python3 scripts/probe_fused.py --m 4824 38592 --reps 10 \
        --json "$OUT/probe_fused.json"
      run 200 "$OUT/bench.log" python3 scripts/probe_engine.py --ab rows --m 4824 38592 \
        --reps 10 --json "$OUT/ab_rows.json"
    fi
    ;;
  s32-h200b)  # session 32, right after s32-h200 on the same warm H200: sustained cycles and
               # energy per call of the FP8 pre-attention in both cluster sizes (under the H200's
               # power cap the clusters' lower energy per call may be worth more than on the H100)
               # and of the out_proj and MLP
    run 200 "$OUT/bench.log" python3 benchmarks/ops_fp8.py --ops pre_attention --m 4824 19296 38592 \
      --reps 10 --no-compile --energy --other-cluster --json "$OUT/bench_energy_pre.json"
    run 200 "$OUT/bench.log" python3 benchmarks/ops_fp8.py --ops out_proj mlp --m 4824 38592 \
      --reps 10 --no-compile --energy --other-cluster --json "$OUT/bench_energy.json"
    ;;
  s32-f)  # session 32, short of device time: on an H200 the BF16 op once and the FP8 ops with
          # both cluster sizes (h200_bars without its second BF16 run and cuBLAS's names), then
          # bars.py; nothing on any other card
    if is_h200; then
      bars_once
    else
      echo "== not an H200: nothing run"
    fi
    ;;
  s32-e)  # session 32's last call: h200_bars on an H200; on any other card the FP8
          # pre-attention's tests (its default runs clusters of two from M = 32768 now) and the
          # engine's, out_proj's and MLP's smoke selection
    if is_h200; then
      h200_bars
    else
      run 300 "$OUT/tests.log" "${PYTEST[@]}" --durations=5 tests/test_pre_attention_gpu.py \
        -k "fp8 and not mma"
      engine_ops_tests
    fi
    ;;
  s32-h200)  # session 32: h200_bars on an H200; on any other card nothing (the call only asks
              # which card came, so that a later one may find an H200)
    if is_h200; then h200_bars; else echo "== not an H200: nothing run"; fi
    ;;
  s32-b)  # session 32, whichever card comes: on an H200, h200_bars; on any other card, the
          # FP8 pre-attention's new cluster rule (pre_attention.FP8_PAIR_CLUSTER2_FROM_M): its
          # same-bytes tests (the default at 38592 is now the clustered kernel), then its A/B at
          # 19296 / 38592 once more, sustained figures included
    if is_h200; then
      h200_bars
    else
      run 100 "$OUT/tests.log" "${PYTEST[@]}" --durations=3 tests/test_pre_attention_gpu.py -k \
        "test_fp8_pre_attention_pair_cluster_same_bits"
      run 150 "$OUT/bench.log" python3 benchmarks/ops_fp8.py --ops pre_attention --m 19296 38592 \
        --reps 10 --no-compile --other-cluster --energy --json "$OUT/bench_pair_cluster.json"
    fi
    ;;
  s32-auto)  # session 32: whichever card comes. On an H200 (where every bar is stated):
             # h200_bars. On any other card: s32-a
    if is_h200; then
      h200_bars
    else
      echo "== not an H200: s32-a" | tee -a "$OUT/bench.log"
      bash "$0" s32-a
      exit $?
    fi
    ;;
  s32-a)  # prepared in session 31 for the next call: the clustered FP8 single launch
          # (pre_attention.FP8_PAIR_CLUSTER = 2): its remaining tests, the clustered out_proj /
          # MLP / FP8 pre-attention under memcheck and synccheck (memcheck_ops.py --clusters),
          # the kernels cuBLAS runs for the baselines on this card (scripts/cublas_kernels.py),
          # then the A/B twice at 9648 / 19296 / 38592 with the sustained figures
    run 150 "$OUT/tests.log" "${PYTEST[@]}" --durations=5 tests/test_pre_attention_gpu.py -k \
      "test_fp8_pre_attention_pair_cluster"
    for tool in memcheck synccheck; do
      run 150 "$OUT/memcheck.log" compute-sanitizer --tool $tool --report-api-errors no \
        --error-exitcode 3 python3 scripts/memcheck_ops.py --clusters
    done
    run 60 "$OUT/cublas.log" python3 scripts/cublas_kernels.py --json "$OUT/cublas_kernels.json"
    for run_id in 1 2; do
      run 150 "$OUT/bench.log" python3 benchmarks/ops_fp8.py --ops pre_attention \
        --m 9648 19296 38592 --reps 10 --no-compile --other-cluster --energy \
        --json "$OUT/bench_pair_cluster_$run_id.json"
    done
    ;;
  s31-g)  # session 31's last device seconds: the FP8 pre-attention's single launch in clusters of
          # two (pre_attention.FP8_PAIR_CLUSTER = 2, opt-in): its same-bytes test at 38592, the
          # A/B at 19296 / 38592, then its reference tests at 4097 (a cluster's second tile past
          # M) and 4824 (graph replay)
    run 60 "$OUT/tests.log" "${PYTEST[@]}" tests/test_pre_attention_gpu.py -k \
      "test_fp8_pre_attention_pair_cluster_same_bits[38592]"
    run 90 "$OUT/bench.log" python3 benchmarks/ops_fp8.py --ops pre_attention --m 19296 38592 \
      --reps 10 --no-compile --other-cluster --json "$OUT/bench_pair_cluster.json"
    run 60 "$OUT/tests.log" "${PYTEST[@]}" tests/test_pre_attention_gpu.py -k \
      "test_fp8_pre_attention_pair_cluster[4097-nvfp4] or test_fp8_pre_attention_pair_cluster[4824-bf16]"
    ;;
  s31-f)  # session 31: the FP8 out_proj and MLP on clusters of two from M = 16384 on
          # (gemm.FP8_OPS_CLUSTER2_FROM_M): the tests that run it (out_proj at 38592 in both
          # forms, the MLP at 19296 in both and at 149796), then both ops at every centre against
          # their chains and against the other cluster size
    run 200 "$OUT/tests.log" "${PYTEST[@]}" --durations=8 tests/test_out_proj_gpu.py \
      tests/test_mlp_gpu.py -k "test_fp8_out_proj[38592 or test_fp8_out_proj_two_launch[38592 \
      or test_mlp_fp8_clusters_by_m or test_mlp_fp8_largest_m"
    smi_start
    run 220 "$OUT/bench.log" python3 benchmarks/ops_fp8.py --ops out_proj mlp --reps 10 \
      --other-cluster --json "$OUT/bench_ops_om.json"
    smi_stop
    ;;
  s31-e)  # session 31's last call, for an H200: the four ops at every centre against their
          # chains, the FP8 ones also with the other gemm.FP8_CLUSTER (issues #4-#7), then the
          # out_proj's and MLP's sustained cycles and energy per call in both cluster forms
          # (since session 32 its first part is bars_once)
    bars_once
    run 180 "$OUT/bench.log" python3 benchmarks/ops_fp8.py --ops out_proj mlp --m 4824 38592 \
      --reps 10 --no-compile --energy --other-cluster --json "$OUT/bench_energy.json"
    ;;
  s31-d)  # session 31: clock cycles and energy per call in sustained windows (--energy) of the
          # FP8 ops against the bare _scaled_mm GEMMs on this card, and the out_proj / MLP with
          # the other gemm.FP8_CLUSTER (B multicast between a pair: less L2 traffic per FLOP),
          # which session 12 found faster under the power cap and slower in graph replays
    run 280 "$OUT/bench.log" python3 benchmarks/ops_fp8.py --ops pre_attention out_proj mlp \
      --m 4824 38592 --reps 10 --no-compile --energy --other-cluster --json "$OUT/bench_energy.json"
    ;;
  s31-c)  # session 31: both pre-attention ops' benchmarks (issues #4 / #5) and the out_proj's
          # and MLP's (#6 / #7) on the tail split's new rule (gemm.TAIL_MIN_GAIN), then the tests
          # of the launches that rule changed: the BF16 op at M = 38592 (P = 1 now unsplit) and
          # the MLP at M = 149796 (FC2's 248 rounds now unsplit)
    smi_start
    pre_attention_benches
    run 200 "$OUT/bench.log" python3 benchmarks/ops_fp8.py --ops out_proj mlp --reps 10 \
      --json "$OUT/bench_ops_om.json"
    smi_stop
    run 240 "$OUT/tests.log" "${PYTEST[@]}" --durations=5 tests/test_pre_attention_gpu.py \
      tests/test_mlp_gpu.py -k "test_bf16_pre_attention[38592] or test_mlp_fp8_largest_m"
    ;;
  s31-a)  # prepared in session 30 for the next H200: s30-f (both pre-attention ops on the
          # packed-word epilogue, issues #4 / #5), then the BF16 op at P = 1 twice, 40 rounds
          # without the compile chain, for the tail split's column against the default (it read
          # 1-5% either way in sessions 21, 22 and 30; its largest possible gain there is ~0.5%)
    smi_start
    pre_attention_benches
    run 200 "$OUT/bench.log" python3 benchmarks/pre_attention.py --p 1 1 --reps 40 --no-compile \
      --json "$OUT/bench_pre_attention_p1.json"
    smi_stop
    ;;
  s30-f)  # session 30's last call: both pre-attention ops' benchmarks (issues #4 and #5) on the
          # packed-word epilogue, for the H200 figures (s30-c / s30-d ran on an H100)
    smi_start
    pre_attention_benches
    smi_stop
    ;;
  s30-d)  # session 30's second call: the FP8 op's benchmark (issue #5), then the pre-attention
          # tests s30-c did not run (142, ~720 s in all on an H100: the stage's 380 s ran the
          # first 77; the other 65 ran as a direct pytest call of their node ids, 342 s)
    smi_start
    run 200 "$OUT/bench.log" python3 benchmarks/ops_fp8.py --ops pre_attention --reps 10 \
      --json "$OUT/bench_ops_fp8.json"
    smi_stop
    run 380 "$OUT/tests.log" "${PYTEST[@]}" --durations=8 tests/test_pre_attention_gpu.py -k \
      "not (4824 and (same_bits or test_bf16_pre_attention[ or test_fp8_pre_attention[))"
    ;;
  s28-b)  # session 28's second call: FC1's single launch against the prologue launch once more
          # (the MLP at the four centres without the torch.compile chain, with the sustained
          # figures: s28-a's medians at M = 38592 spread 9% between equivalent forms), then
          # s27-g's RoPE-operand A/Bs (pacs0, paprefetch)
    smi_start
    run 240 "$OUT/bench.log" python3 benchmarks/ops_fp8.py --ops mlp --m 4824 9648 19296 38592 \
      --reps 10 --no-compile --energy --json "$OUT/bench_ops_fp8_mlp.json"
    smi_stop
    rope_operand_abs
    ;;
  s27-g)  # session 27: what the RoPE operands' load latency costs the pre-attention epilogues
          # (probe_engine.py --ab pacs0: every row reads cache row 0, L1 hits, wrong outputs;
          # the FP8 and BF16 ops' defaults, the plain QKV GEMMs as controls), and the BF16
          # op's single launch with those lines prefetched into L1 before each unit's mainloop
          # (--ab paprefetch, the same bytes)
    rope_operand_abs
    ;;
  s27-f)  # session 27, s27-e cut to a short device budget: FC1's single launch, the smoke run,
          # its other tests, and the MLP benchmark at M = 4824 / 38592 without the torch.compile
          # chain (the two FC1 forms against each other)
    if timeout 120 "${PYTEST[@]}" tests/test_mlp_gpu.py -k \
        "fc1_single_launch_same_bytes and 4824" >> "$OUT/tests.log" 2>&1; then
      echo "== FC1 smoke test passed" | tee -a "$OUT/tests.log"
      run 100 "$OUT/tests.log" "${PYTEST[@]}" --durations=5 tests/test_mlp_gpu.py -k \
        "fc1_single_launch and not (same_bytes and 4824)"
      run 100 "$OUT/bench.log" python3 benchmarks/ops_fp8.py --ops mlp --m 4824 38592 --reps 6 \
        --no-compile --json "$OUT/bench_ops_fp8_mlp.json"
    else
      echo "== the FC1 smoke test failed: see tests.log" | tee -a "$OUT/tests.log"
      status=1
    fi
    ;;
  s27-e)  # session 27: FC1's single launch (mlp.FC1_FUSED_PROLOGUE): a one-test smoke run (the
          # prologue launch's bytes at M = 4824), then its other tests and the MLP benchmark with
          # h3_fc1_one_launch; the FP8 pre-attention's tests with the single launch as the
          # default (the reference at every M and out mode, graphs on both back ends, the two
          # launches' bytes, the pairs' tail split falling back to two launches); the panomath
          # A/B (the FP8 op's Q/K math too, since session 27); memcheck / synccheck of the MLP in
          # both forms (memcheck_ops.py --mlp). Most wanted first.
    if timeout 150 "${PYTEST[@]}" tests/test_mlp_gpu.py -k \
        "fc1_single_launch_same_bytes and 4824" >> "$OUT/tests.log" 2>&1; then
      echo "== FC1 smoke test passed" | tee -a "$OUT/tests.log"
      run 150 "$OUT/tests.log" "${PYTEST[@]}" --durations=5 tests/test_mlp_gpu.py -k \
        "fc1_single_launch and not (same_bytes and 4824)"
      smi_start
      run 150 "$OUT/bench.log" python3 benchmarks/ops_fp8.py --ops mlp \
        --m 4824 9648 19296 38592 --reps 10 --json "$OUT/bench_ops_fp8_mlp.json"
      smi_stop
    else
      echo "== the FC1 smoke test failed: see tests.log" | tee -a "$OUT/tests.log"
      status=1
    fi
    T=tests/test_pre_attention_gpu.py
    run 200 "$OUT/tests.log" "${PYTEST[@]}" --durations=5 $T::test_fp8_pre_attention \
      $T::test_fp8_pre_attention_graph $T::test_fp8_pre_attention_fused_prologue_same_bits \
      $T::test_fp8_pre_attention_tail_split_takes_two_launches
    # what the Q/K math costs the FP8 and BF16 pre-attention (-DH3_PA_NOMATH, timing only)
    run 150 "$OUT/ab.log" python3 scripts/probe_engine.py --ab panomath --m 4824 38592 --reps 10 \
      --json "$OUT/ab_panomath.json"
    for tool in memcheck synccheck; do
      run 120 "$OUT/memcheck.log" compute-sanitizer --tool $tool --report-api-errors no \
        --error-exitcode 3 python3 scripts/memcheck_ops.py --mlp
    done
    ;;
  s26-f)  # prepared in session 26: the FP8 pre-attention's single launch
          # (pre_attention.FP8_FUSED_PROLOGUE): a one-test smoke run (the two launches' bytes at
          # M = 4824), then, if it passed, its reference tests (every out mode, M = 257 / 4097 /
          # 4824, graph replay at 4824), the same bytes at 9648, memcheck and synccheck; then
          # the FP8 op's benchmark with h3_one_launch beside the default at the four centres
    if smoke_then_tests "test_fp8_pre_attention_fused_prologue_same_bits and 4824" \
        "test_fp8_pre_attention_fused_prologue" --fp8; then
      smi_start
      run 200 "$OUT/bench.log" python3 benchmarks/ops_fp8.py --ops pre_attention \
        --m 4824 9648 19296 38592 --reps 10 --json "$OUT/bench_ops_fp8_pre.json"
      smi_stop
    fi
    ;;
  # s26-e (s26-a's BF16 selection with BF16_EPILOGUE = "defer") and s26-d (the A/Bs defer1 /
  # defer3 / deferearly / pafull) exist at commit beaece3; the deferred epilogue and
  # -DH3_PA_FULLSTAGE were measured slower and removed in session 27.
  s26-c)  # (its deferred-epilogue parts removed in session 27: measured slower)
          # session 26: the BF16 benchmark and the panomath A/B
    smi_start
    run 200 "$OUT/bench.log" python3 benchmarks/pre_attention.py --p 8 4 2 1 1 --reps 20 \
      --no-fused --json "$OUT/bench_pre_attention.json"
    run 100 "$OUT/ab.log" python3 scripts/probe_engine.py --ab panomath --m 4824 38592 --reps 10 \
      --json "$OUT/ab_panomath.json"
    smi_stop
    ;;
  s26-b)  # (its full-staging A/Bs pafull / pafullnomath removed in session 27: measured slower)
          # session 26: what the BF16 single launch's epilogue costs its consumers (issue #4):
          # a timing-only build against the default, with the plain bf16 QKV GEMM as a control
          # (probe_engine.py --ab panomath, the RMSNorm / RoPE skipped)
    for ab in panomath; do
      run 150 "$OUT/ab.log" python3 scripts/probe_engine.py --ab $ab --m 4824 38592 --reps 12 \
        --json "$OUT/ab_$ab.json"
    done
    ;;
  s26-a)  # session 26's first call: issue #4's figures with the single-launch default (and, on an
          # H200, the BF16 op's tests: acceptance 2 there), the FP8 pre-attention and the MLP
          # against their chains (issues #5, #7) on the same card
    if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
      run 240 "$OUT/tests.log" "${PYTEST[@]}" --durations=8 tests/test_pre_attention_gpu.py \
        -k "bf16_pre_attention and not heads and not (fused_prologue and not same_bits)"
    fi
    smi_start
    run 170 "$OUT/bench.log" python3 benchmarks/pre_attention.py --p 8 4 2 1 1 --reps 20 \
      --no-fused --json "$OUT/bench_pre_attention.json"
    run 200 "$OUT/bench.log" python3 benchmarks/ops_fp8.py --ops pre_attention mlp \
      --m 4824 9648 19296 38592 --reps 10 --json "$OUT/bench_ops_fp8.json"
    smi_stop
    ;;
  s25-c)  # session 25's third call: the BF16 op's tests with the single launch as the default
          # (the two launches as an A/B form), its benchmark once more, and the FP8 op's benchmark
          # with the n192 pairs' tail split (h3_pair_tail) beside the default
    run 240 "$OUT/tests.log" "${PYTEST[@]}" --durations=8 tests/test_pre_attention_gpu.py \
      -k "bf16_pre_attention and not heads and not (fused_prologue and not same_bits)"
    smi_start
    run 140 "$OUT/bench.log" python3 benchmarks/pre_attention.py --p 8 4 2 1 1 --reps 20 \
      --no-fused --json "$OUT/bench_pre_attention.json"
    run 200 "$OUT/bench.log" python3 benchmarks/ops_fp8.py --ops pre_attention \
      --m 4824 9648 19296 38592 --reps 10 --json "$OUT/bench_ops_fp8_pre.json"
    smi_stop
    ;;
  s25-d)  # session 25's last call: the single-launch BF16 default under memcheck and synccheck
          # (scripts/memcheck_ops.py, with the out_proj and the MLP), the examples (the block runs
          # the BF16 op) and the PDL tests
    run 130 "$OUT/memcheck.log" compute-sanitizer --tool memcheck --report-api-errors no \
      --error-exitcode 3 python3 scripts/memcheck_ops.py
    run 130 "$OUT/memcheck.log" compute-sanitizer --tool synccheck --report-api-errors no \
      --error-exitcode 3 python3 scripts/memcheck_ops.py
    run 150 "$OUT/tests.log" "${PYTEST[@]}" --durations=5 tests/test_examples.py tests/test_pdl_gpu.py
    ;;
  s24-a)  # prepared in session 24 (no GPU lent then): the FP8 pre-attention's n192 pairs with
          # their tail split (pre_attention.FP8_PAIR_TAIL_SPLIT, kernel
          # pre_attention_fp8_n192_tail_sm90; at M = 4824 the last of 17 rounds holds 16 pairs
          # for 132 CTAs): its tests (a one-minute smoke test first: the rest only if it passed),
          # then the op's benchmark with h3_pair_tail beside the default at the four centres.
          # Prediction: -2.5 to -3.5% at 4824, ~-1.5% at 9648, < 1% at 19296 / 38592.
    run 60 "$OUT/tests.log" "${PYTEST[@]}" tests/test_pre_attention_gpu.py \
      -k "test_fp8_pre_attention_pair_tail_split and 4824 and bf16 and not graph"
    if [ "$status" = 0 ]; then
      run 240 "$OUT/tests.log" "${PYTEST[@]}" --durations=8 tests/test_pre_attention_gpu.py \
        -k "test_fp8_pre_attention_pair_tail_split and not (4824 and bf16 and not graph)"
      smi_start
      run 300 "$OUT/bench.log" python3 benchmarks/ops_fp8.py --ops pre_attention \
        --m 4824 9648 19296 38592 --reps 16 --json "$OUT/bench_ops_fp8_pre.json"
      smi_stop
    fi
    ;;
  s23-a)  # prepared in session 23 (no GPU lent then): the BF16 pre-attention's two new forms,
          # the epilogue one head at a time (pre_attention.BF16_EPILOGUE = "heads": head 1's
          # math under head 0's store pass) and the single launch (BF16_FUSED_PROLOGUE: the
          # GEMM kernel writes a itself behind ready counters): their GPU tests and the
          # default's on the wgmma back end, the epilogue's time per tile and the fused form's
          # mainloop (probe), and the fused form with a first group of 4 M-tile pairs
          # (probe_engine.py --ab fg4). Then s23-b.
    # first a smoke test of the single launch with a short timeout (a hang costs one minute),
    # and the fused parts below only if it passed
    run 60 "$OUT/tests.log" "${PYTEST[@]}" tests/test_pre_attention_gpu.py \
      -k "test_bf16_pre_attention_fused_prologue_same_bits and 4824"
    fused_ok=$status
    run 240 "$OUT/tests.log" "${PYTEST[@]}" --durations=8 tests/test_pre_attention_gpu.py \
      -k "test_bf16_pre_attention and not mma_backend and not (same_bits and 4824)"
    smi_start
    cases="bf16_pre_attention bf16_pre_attention_heads bf16_gemm_qkv"
    [ "$fused_ok" = 0 ] && cases="$cases bf16_pre_attention_fused"
    run 100 "$OUT/probe.log" python3 scripts/probe_engine.py --m 4824 38592 --reps 5 \
      --cases $cases --json "$OUT/probe_engine.json"
    if [ "$fused_ok" = 0 ]; then
      for g in fg4 fg2; do
        run 100 "$OUT/ab.log" python3 scripts/probe_engine.py --ab $g --m 4824 38592 --reps 20 \
          --json "$OUT/ab_$g.json"
      done
    fi
    smi_stop
    ;;
  s23-b)  # after s23-a: the op's benchmark at the four centres and P = 1 once more, h3_heads,
          # h3_fused, h3_fused_heads and the tail split's A/B beside the default in each
    # (the single-launch forms only if their smoke test passes: a hang costs one minute)
    run 60 "$OUT/tests.log" "${PYTEST[@]}" tests/test_pre_attention_gpu.py \
      -k "test_bf16_pre_attention_fused_prologue_same_bits and 4824"
    nofused=""
    [ "$status" = 0 ] || nofused="--no-fused"
    smi_start
    run 420 "$OUT/bench.log" python3 benchmarks/pre_attention.py --p 8 4 2 1 1 --reps 30 \
      $nofused --json "$OUT/bench_pre_attention.json"
    smi_stop
    ;;
  s23-c)  # prepared in session 23: the single-launch FP8 out_proj's first round (issue #6's
          # fused cost, 5.1-6.0% at M = 4824 against the bar's 5%): the tile order's groups of 1
          # or 2 M-tiles instead of 8 (-DH3_GROUP_M), so that the first round reads 640 / 768
          # rows, and 5 then groups of 2 (-DH3_FIRST_GROUP_M=5). scripts/spare_rows_model.py
          # puts the spare rows' smallest slack at +32 / +33 / +26 us for these (and at -13 /
          # -5 us for session 22's fg5 / fg6 with groups of 8, which waited). A different order
          # puts other tiles in the tail split's last round, so same_<name> may read False.
    run 150 "$OUT/probe.log" python3 scripts/probe_fused.py --m 4824 9648 --reps 16 \
      --variant g1=H3_GROUP_M=1 g2=H3_GROUP_M=2 fg5g2=H3_FIRST_GROUP_M=5,H3_GROUP_M=2 \
      --json "$OUT/probe_fused.json"
    ;;
  s22-g)  # session 22's last call: the pre-attention operators on the current engine (unchanged
          # since session 21; the BF16 op's four centres last ran together in s19-d): BF16 (issue
          # #4) and FP8 (issue #5) against their torch.compile chains and bare GEMMs
    smi_start
    run 200 "$OUT/bench.log" python3 benchmarks/pre_attention.py --json "$OUT/bench_pre_attention.json"
    run 150 "$OUT/bench.log" python3 benchmarks/ops_fp8.py --ops pre_attention \
      --json "$OUT/bench_ops_pre.json"
    smi_stop
    ;;
  s22-a)  # prepared in session 21: the device's scalar codecs one element at a time against
          # formats.py on special values (tests/test_codec_gpu.py, h3cupy.ops.codec)
    run 60 "$OUT/tests.log" "${PYTEST[@]}" --durations=5 tests/test_codec_gpu.py
    ;;
  s22-b)  # session 22's first call: s22-a, then the single-launch out_proj / FC2 with the spare
          # warps' rows staged in shared memory by a bulk copy (the new default): the out_proj's
          # and MLP's tests that reach the spare rows (M > the first round's rows; the MLP's
          # K = 14336 rows in two chunks), probe_fused.py and probe_engine.py --ab rows against
          # the form before (-DH3_FUSED_LDG_ROWS), then synccheck of the ops' single-launch paths
    run 60 "$OUT/tests.log" "${PYTEST[@]}" --durations=5 tests/test_codec_gpu.py
    run 150 "$OUT/tests.log" "${PYTEST[@]}" --durations=5 tests/test_out_proj_gpu.py \
      tests/test_mlp_gpu.py -k "test_fp8_out_proj[4824-int32] or test_fp8_out_proj[4097-int64] \
      or nan_rows[fused] or test_fp8_out_proj_tail_split[4824-True-True] or \
      test_fp8_out_proj_aliasing_residual[4824] or test_fp8_out_proj_graph[fused] or \
      test_fp8_out_proj_other_cluster[4824-True] or test_mlp_fp8[4824] or test_mlp_fp8[4097] or \
      test_mlp_fp8_graph[fused]"
    run 70 "$OUT/probe.log" python3 scripts/probe_fused.py --m 4824 9648 \
      --variant ldg=H3_FUSED_LDG_ROWS --json "$OUT/probe_fused.json"
    run 170 "$OUT/ab.log" python3 scripts/probe_engine.py --ab rows --m 4824 9648 38592 --reps 10 \
      --json "$OUT/ab_rows.json"
    run 110 "$OUT/memcheck.log" compute-sanitizer --tool synccheck --report-api-errors no \
      --error-exitcode 3 python3 scripts/memcheck_ops.py
    ;;
  s21-h)  # session 21: the consumer warps' first-round rows held whole in registers (one round
          # trip instead of two passes; K = 7168 only): the single-launch out_proj's and the MLP's
          # tests, then probe_fused.py against the two-pass build (-DH3_FUSED_TWO_PASS). Ran at
          # 80fe198: level (0.2%), so the held rows were removed; run it from that commit.
    run 90 "$OUT/tests.log" "${PYTEST[@]}" --durations=5 tests/test_out_proj_gpu.py \
      tests/test_mlp_gpu.py -k "test_fp8_out_proj[4824-int32] or test_fp8_out_proj[129-int64] \
      or nan_rows[fused] or test_fp8_out_proj_tail_split[4824-True-True] or \
      test_fp8_out_proj_graph[fused] or test_mlp_fp8[4824]"
    run 50 "$OUT/probe.log" python3 scripts/probe_fused.py --m 4824 9648 \
      --variant twopass=H3_FUSED_TWO_PASS --json "$OUT/probe_fused.json"
    ;;
  s21-g)  # session 21: the single-launch out_proj with its tile order grouped by 3 / 4 M-tile
          # pairs instead of 8 (-DH3_GROUP_M), so that the first round of tiles reads 768 / 1024
          # rows instead of 2048 and the consumer warps quantize fewer before their first tile:
          # probe_fused.py's timings of the fused and the on-quantized-input kernels of each
          # build, and each build's bytes against the default's (ran: 3 / 4 were 0.2-1.3% slower)
    run 200 "$OUT/probe.log" python3 scripts/probe_fused.py --m 4824 9648 \
      --variant g3=H3_GROUP_M=3 g4=H3_GROUP_M=4 --json "$OUT/probe_fused.json"
    ;;
  s21-f)  # session 21: memcheck / synccheck over the engine's GEMM paths and the quantized ops
          # on the tile index formed from the tile count and the NaN-aware NVFP4 decode
    run 150 "$OUT/memcheck.log" compute-sanitizer --tool memcheck --report-api-errors no \
      --error-exitcode 3 python3 scripts/memcheck_gemm.py
    run 120 "$OUT/memcheck.log" compute-sanitizer --tool memcheck --report-api-errors no \
      --error-exitcode 3 python3 scripts/memcheck_ops.py
    run 120 "$OUT/memcheck.log" compute-sanitizer --tool synccheck --report-api-errors no \
      --error-exitcode 3 python3 scripts/memcheck_ops.py
    ;;
  s21-e)  # session 21's last call: the FP8 out_proj at M = 4824 (40 rounds: s21-c read 1.1446x
          # against torch.compile, s20-d 1.1546x), the FP8 pre-attention's figures on this
          # engine (tail split on / off), and the BF16 pre-attention at P = 1 (40 rounds), where
          # the default (tail split on) read slower than without the split in three runs
    smi_start
    run 120 "$OUT/bench.log" python3 benchmarks/ops_fp8.py --ops out_proj --m 4824 --reps 40 \
      --json "$OUT/bench_ops_4824.json"
    run 150 "$OUT/bench.log" python3 benchmarks/ops_fp8.py --ops pre_attention \
      --json "$OUT/bench_ops_pre.json"
    run 150 "$OUT/bench.log" python3 benchmarks/pre_attention.py --p 1 --reps 40 --no-compile \
      --json "$OUT/bench_pre_attention.json"
    smi_stop
    ;;
  s21-d)  # session 21: NaN in the NVFP4 block quantizers (the block amax through fmax_nan, and
          # e4m3_to_f32 decoding 0x7f / 0xff as NaN): the new NaN tests and the NVFP4 paths
          # whose SASS changed (the NVFP4 GEMM, out_proj and pre-attention on both back ends,
          # the FP8 pre-attention's NVFP4 out mode, the prologue, the weight helpers)
    P=tests/test_pre_attention_gpu.py
    run 120 "$OUT/tests.log" "${PYTEST[@]}" --durations=5 tests/test_weights_gpu.py \
      tests/test_prologue_gpu.py tests/test_gemm_gpu.py::test_gemm_nvfp4
    run 120 "$OUT/tests.log" "${PYTEST[@]}" --durations=5 tests/test_out_proj_gpu.py -k nvfp4
    run 220 "$OUT/tests.log" "${PYTEST[@]}" --durations=5 "$P::test_fp8_pre_attention[1-nvfp4]" \
      "$P::test_fp8_pre_attention[4824-nvfp4]" "$P::test_fp8_pre_attention_mma_backend[129-nvfp4]" \
      "$P::test_fp8_pre_attention_graph[nvfp4-wgmma]" "$P::test_nvfp4_pre_attention[129-bf16]" \
      "$P::test_nvfp4_pre_attention[129-e4m3]" "$P::test_nvfp4_pre_attention[4097-nvfp4]" \
      "$P::test_nvfp4_pre_attention_hopper_path[4097-bf16]" \
      "$P::test_nvfp4_pre_attention_hopper_path[4097-nvfp4]" "$P::test_nvfp4_dequantize_bf16" \
      "$P::test_nvfp4_pre_attention_graph[nvfp4-mma]" "$P::test_nvfp4_pre_attention_graph[nvfp4-wgmma]"
    ;;
  s21-c)  # session 21's last call: the NVFP4 NaN tests s21-d's time limit cut (the prologue's
          # and the NVFP4 GEMM's), then the figures on the engine with the tile index formed from
          # the tile count: the FP8 out_proj and MLP against torch.compile (16 rounds) and the
          # BF16 pre-attention at P = 1 (20 rounds). (s21-a, the out_proj's no-allocate row
          # loads, ran at 55856cb: 3-5% slower, removed.)
    run 90 "$OUT/tests.log" "${PYTEST[@]}" --durations=5 tests/test_gemm_gpu.py::test_gemm_nvfp4 \
      tests/test_prologue_gpu.py::test_prologue_nvfp4_nan_blocks \
      tests/test_prologue_gpu.py::test_prologue_fp8_nan_rows
    smi_start
    run 300 "$OUT/bench.log" python3 benchmarks/ops_fp8.py --ops out_proj mlp \
      --m 4824 9648 19296 38592 --reps 16 --json "$OUT/bench_ops.json"
    run 120 "$OUT/bench.log" python3 benchmarks/pre_attention.py --p 1 --reps 20 \
      --json "$OUT/bench_pre_attention.json"
    smi_stop
    ;;
  s20-e)  # session 20's last call: the BF16 pre-attention with its second row's RoPE operands
          # loaded during the first row's math (ee19a9e): its tests and its benchmark
    run 80 "$OUT/tests.log" "${PYTEST[@]}" --durations=5 tests/test_pre_attention_gpu.py -k \
      "test_bf16_pre_attention[1] or test_bf16_pre_attention[4097 or no_tail_split or \
      test_bf16_pre_attention_graph or (test_bf16_pre_attention_positions and 4097)"
    run 70 "$OUT/bench.log" python3 benchmarks/pre_attention.py --p 8 1 --reps 5 \
      --json "$OUT/bench_pre_attention.json"
    ;;
  s20-c)  # session 20's third call: the engine with the warpgroup index (and the consumers'
          # warp index, the tail split's barrier result) passed through a shuffle, so that the
          # consumers' loop state and wgmma descriptors live in uniform registers: the engine's,
          # out_proj's, MLP's and both pre-attentions' tests (tail splits included), then the
          # A/B against the engine before it (probe_engine.py --ab uniform)
    engine_ops_tests
    run 110 "$OUT/tests.log" "${PYTEST[@]}" --durations=5 tests/test_pre_attention_gpu.py -k \
      "test_bf16_pre_attention[4097 or test_bf16_pre_attention_no_tail_split or \
      test_fp8_pre_attention[4824 or (test_fp8_pre_attention_tile_m192 and 4824 and bf16)"
    run 200 "$OUT/ab.log" python3 scripts/probe_engine.py --ab uniform --m 4824 38592 --reps 10 \
      --energy --json "$OUT/ab_uniform.json"
    ;;
  s20-b)  # session 20's second call: NaN rows through every per-token FP8 quantizer (quantize.cu,
          # the prologue; fmax_nan), the FP8 pre-attention on its new stash store (every out
          # mode), the BF16 pre-attention's PDL reading at P = 1 / 2 repeated, the FP8
          # pre-attention's figures, and the out_proj's memory workload (ncu) single-launch
          # against the same kernel on quantized input
    run 60 "$OUT/tests.log" "${PYTEST[@]}" --durations=5 tests/test_out_proj_gpu.py \
      tests/test_weights_gpu.py -k "nan_rows or weight_helpers"
    run 90 "$OUT/tests.log" "${PYTEST[@]}" --durations=5 tests/test_prologue_gpu.py -k \
      "nan_rows or M4097 or M38592-rows9"
    run 170 "$OUT/tests.log" "${PYTEST[@]}" --durations=5 tests/test_pre_attention_gpu.py -k \
      "test_fp8_pre_attention[ or (test_fp8_pre_attention_graph and wgmma) or test_bf16_pre_attention[129"
    smi_start
    run 120 "$OUT/bench.log" python3 benchmarks/pre_attention.py --p 2 1 --reps 20 \
      --json "$OUT/bench_pre_attention.json"
    run 130 "$OUT/bench.log" python3 benchmarks/ops_fp8.py --ops pre_attention \
      --json "$OUT/bench_ops_pre.json"
    smi_stop
    OUT=$OUT run 150 "$OUT/ncu.log" bash scripts/profile_ncu.sh out-proj-mem
    ;;
  # s20-a (session 20's first call: the out_proj / MLP tests on 5b7c54e's schedule, then
  # session 19's prepared A/Bs, probe_engine.py --ab fc1y / pastash: -DH3_FC1_Y_PACKED, dropped,
  # and -DH3_PA_STASH_STORE, adopted) and s20-fc1 / s20-pa exist at commit 09970a0.
  s19-e)  # the session's last device minutes: where the single-launch out_proj's 7-9% over the
          # kernel on quantized input goes at M = 4824 / 9648 (probe_fused.py's counters)
    run 100 "$OUT/probe.log" python3 scripts/probe_fused.py --m 4824 9648 \
      --json "$OUT/probe_fused.json"
    ;;
  s19-d)  # the pre-attention operators on the descriptor-add engine: BF16 (issue #4) and FP8
          # (issue #5) against their torch.compile chains and bare GEMMs
    smi_start
    run 140 "$OUT/bench.log" python3 benchmarks/pre_attention.py --json "$OUT/bench_pre_attention.json"
    run 130 "$OUT/bench.log" python3 benchmarks/ops_fp8.py --ops pre_attention \
      --json "$OUT/bench_ops_pre.json"
    smi_stop
    ;;
  s19-c)  # session 19's third call: the out_proj graph tests s19-b's time limit cut, memcheck of
          # every GEMM path and of the operators' single-launch forms (spare-warp rows included)
          # on the new kernels, and a second benchmark of the operators against torch.compile
    run 60 "$OUT/tests.log" "${PYTEST[@]}" --durations=5 tests/test_out_proj_gpu.py -k \
      "test_fp8_out_proj_graph"
    run 120 "$OUT/memcheck.log" compute-sanitizer --tool memcheck --report-api-errors no \
      --error-exitcode 3 python3 scripts/memcheck_gemm.py
    run 100 "$OUT/memcheck.log" compute-sanitizer --tool memcheck --report-api-errors no \
      --error-exitcode 3 python3 scripts/memcheck_ops.py
    smi_start
    run 120 "$OUT/bench.log" python3 benchmarks/ops_fp8.py --ops out_proj mlp \
      --m 4824 9648 19296 38592 --reps 20 --json "$OUT/bench_ops.json"
    smi_stop
    ;;
  # s19-b (session 19: the wgmma kernels' tests on the descriptor add, the packed row
  # quantization's A/B against the rows before it, probe_engine.py --ab quant1, a diagnostic
  # build removed after the session, and the operators' benchmarks) exists at commit 83608ed.
  s19-a)  # session 19's first call: every skeleton under the new dynamic-shared-memory check
          # (a trap when the launch's size is below the kernel's layout), the out_proj / MLP
          # tests on the host smem fix (43c2235), then the -DH3_DESC_ADD A/B (s19-desc)
    run 250 "$OUT/tests.log" "${PYTEST[@]}" --durations=5 tests/test_out_proj_gpu.py -k \
      "fp8 and not mma and not errors and (test_fp8_out_proj[ or aliasing or two_launch or graph or capture or deterministic or tail_split or other_cluster)"
    run 150 "$OUT/tests.log" "${PYTEST[@]}" --durations=5 tests/test_mlp_gpu.py -k \
      "test_mlp_fp8[1] or test_mlp_fp8[257 or test_mlp_fp8[4824 or graph"
    run 120 "$OUT/tests.log" "${PYTEST[@]}" --durations=5 tests/test_gemm_gpu.py \
      tests/test_pre_attention_gpu.py -k "(test_gemm_bf16 and 129) or (e4m3_scaled and 129) or \
      test_gemm_nvfp4 or ws_many_tiles or below_the_kernel_layout or (m192 and x1) or test_bf16_pre_attention[129] or \
      test_fp8_pre_attention[129 or test_nvfp4_pre_attention[129"
    run 200 "$OUT/ab.log" python3 scripts/probe_engine.py --ab desc --m 4824 38592 --reps 10 \
      --energy --json "$OUT/ab_desc.json"
    ;;
  s19-desc)  # prepared in session 18, not yet run: the engine with each k-step's wgmma descriptor
             # added to the k-tile's (-DH3_DESC_ADD; ~9% fewer mainloop instructions in the FP8
             # out_proj's SASS): bytes and graph replays against the default in one run
    run 300 "$OUT/ab.log" python3 scripts/probe_engine.py --ab desc --m 4824 38592 --reps 10 \
      --energy --json "$OUT/ab_desc.json"
    ;;
  s18-f)  # the last paths of the new gated epilogue not run in s18-d: the clustered kernels
          # (gemm.FP8_CLUSTER = 2: other_cluster), the MLP at M = 149796, the NVFP4 op's Hopper
          # path (the epilogue's alpha form, unchanged code)
    run 170 "$OUT/tests.log" "${PYTEST[@]}" --durations=5 tests/test_out_proj_gpu.py \
      tests/test_mlp_gpu.py -k "(other_cluster and not mma) or largest_m or (hopper_path and 4097)"
    ;;
  # s18-e (the single-launch forms' first-round rows held in registers, tested and A/B-timed
  # against the rows as before: 1.6-3.8% slower, reverted) exists at commit e19e93e.
  # s18-d (session 18: the new gated epilogue's tests and its A/B against the old one,
  # probe_engine.py --ab gated1, a diagnostic build removed after the session) exists at 7d4efb3.
  s18-c)  # the operators' default kernels, stall samples per SASS instruction (profile_ncu.sh
          # src-ops, M = 9648): where the epilogues' time goes after the gated residual's diet
    OUT=$OUT timeout 560 bash scripts/profile_ncu.sh src-ops > "$OUT/ncu.log" 2>&1 || status=1
    ;;
  # s18-b (session 18: the new gated epilogue's tests and its A/B against the old one,
  # probe_engine.py --ab gated1, a diagnostic build removed after the session) exists at 7d4efb3.
  s18-a)  # session 18's first call: the MLP's graph tests on the three-launch default (session
          # 17's last round ran out of time before test_mlp_fp8_graph[fused]); the engine probe
          # of the out_proj's GEMM against the plain O GEMM at M = 38592; the out_proj's stall
          # samples per SASS instruction (profile_ncu.sh out-proj-src)
    run 150 "$OUT/tests.log" "${PYTEST[@]}" --durations=5 tests/test_mlp_gpu.py -k "graph and not mma"
    run 120 "$OUT/probe.log" python3 scripts/probe_engine.py --m 38592 --reps 3 \
      --cases fp8_gemm_o out_proj_gemm out_proj_fused --json "$OUT/probe_engine.json"
    OUT=$OUT timeout 330 bash scripts/profile_ncu.sh out-proj-src > "$OUT/ncu.log" 2>&1 || status=1
    ;;
  # s17-a .. s17-d (session 17's deferred epilogue, promotion mode 5: tests, benchmarks, the
  # ops' tests with it on by default, memcheck) exist at commit a272548; measured level on the
  # operators and 1-4% slower on the plain GEMM, removed (NOTES.md, session 17).
  s17-f)  # mlp.FUSED_QUANT on by default (FC2 quantizes y in its launch): the MLP's wgmma-path
          # tests on the new default (M = 1 .. 4824, 149796, aliasing, graphs, the tail split
          # off) and the four-launch form by name
    run 330 "$OUT/tests.log" "${PYTEST[@]}" --durations=10 tests/test_mlp_gpu.py \
      -k "not mma and not other_cluster and not errors and not exhaustive"
    ;;
  # s16-a's second stage needed more than its 240 s (42 of 55 tests passed, none failed);
  # s16-b ran the rest. Rerun the two together, or raise that limit and drop the MLP stage.
  s16-a)  # session 16: every mma.sync / NVFP4 kernel sm_120a runs, now on the plans that fit
          # sm_120's 99 KiB of shared memory (64-byte k-tiles), tested on the H200 with the same
          # layouts; the release fence in every form. Engine tests first, then the operators'.
    run 150 "$OUT/tests.log" "${PYTEST[@]}" --durations=8 tests/test_gemm_gpu.py \
      -k "mma_tma or nvfp4 or mma_sync or shared_memory_limit"
    run 240 "$OUT/tests.log" "${PYTEST[@]}" --durations=8 tests/test_pre_attention_gpu.py \
      tests/test_out_proj_gpu.py -k "mma or (nvfp4 and not hopper_path and not dequantize and not wgmma)"
    run 150 "$OUT/tests.log" "${PYTEST[@]}" --durations=8 tests/test_mlp_gpu.py -k "mma"
    ;;
  s16-d)  # session 16's last call: memcheck over every GEMM path, the NVFP4 GEMM's two (the
          # sm_120-plan skeleton and the Hopper dequantize + bf16 engine path) now among them
    run 150 "$OUT/memcheck.log" compute-sanitizer --tool memcheck --report-api-errors no \
      --error-exitcode 3 python3 scripts/memcheck_gemm.py
    ;;
  # s16-c was the `tests` mode below, at commit 789a6af (results/tests_s16_c_*)
  s16-b)  # session 16: s16-a's operator stage stopped at its 240 s limit after 42 of 55 tests
          # (the 43rd: test_nvfp4_pre_attention_graph[e4m3-mma]); the 13 left, named as they
          # start and with Python's stacks dumped after 50 s in one test (after the engine's
          # mma.sync tests again, with the deep ring's build); then memcheck over every
          # GEMM path (the mma.sync forms: producer warpgroup, thread 0, the sm_120 plan), then
          # the mma.sync plans timed in one run. It ran at commit 4fc1b22 with a fourth backend,
          # mma_tma_deep (8 stages of 64-byte k-tiles in the 128-byte ring's bytes, producer
          # warpgroup): measured 6-12% slower than the default, removed
    run 60 "$OUT/tests.log" "${PYTEST[@]}" tests/test_gemm_gpu.py -k "mma_tma or shared_memory_limit"
    run 110 "$OUT/tests.log" "${PYTEST[@]}" -v --durations=8 tests/test_out_proj_gpu.py \
      -k "mma or (nvfp4 and not hopper_path and not wgmma)"
    run 110 "$OUT/tests.log" "${PYTEST[@]}" -v -o faulthandler_timeout=50 --durations=8 \
      tests/test_pre_attention_gpu.py -k "nvfp4_pre_attention_graph"
    run 140 "$OUT/memcheck.log" compute-sanitizer --tool memcheck --report-api-errors no \
      python3 scripts/memcheck_gemm.py
    smi_start
    run 150 "$OUT/bench.log" python3 benchmarks/gemm.py --fmt bf16 --shapes qkv o \
      --m 4824 38592 --backend mma_tma mma_tma_t0 mma_tma_sm120 --reps 10 \
      --json "$OUT/bench_gemm_mma_plans.json"
    smi_stop
    ;;
  # s15-g / s15-h (the producer-warpgroup form's first test, then its race's diagnostic and its
  # timing) exist at the commits they ran at, 3f595cf (s15-g) and 8bfb223 (s15-h): the kernels
  # on main are SASS-identical to s15-h's (ws) and 5d71fb1's (thread 0, operators); NOTES.md
  s15-f)  # after the review's shared host-upload helper (testing.torch_cuda): the tests and the two
          # benchmarks that use it, briefly (no figures taken from this call)
    run 120 "$OUT/tests.log" "${PYTEST[@]}" tests/test_pdl_gpu.py -k bits
    run 120 "$OUT/tests.log" "${PYTEST[@]}" tests/test_pre_attention_gpu.py -k graph_and_determinism
    run 150 "$OUT/bench.log" python3 benchmarks/pre_attention.py --p 8 --reps 2 --no-compile
    run 150 "$OUT/bench.log" python3 benchmarks/ops_fp8.py --m 4824 --reps 2 --no-compile --ops out_proj
    ;;
  s15-e)  # the mma.sync back end's stall samples per SASS instruction on its kept (pre-session-15)
          # main loop, for the record beside s15-c's samples of the pipelined loop
    OUT=$OUT bash scripts/profile_ncu.sh mma-src
    ;;
  # s15-b .. s15-d (the mma.sync A/Bs of benchmarks/NOTES.md, session 15) exist at the commits
  # they ran at, ae243d8 (b), 3a2dba0 (c) and bd5f062 (d); their script and kernels are removed
  s15-a)  # (never started: no machine was lent; s15-b ran its tests, s15-e its stall samples)
          # session 15's first call: the engine's GEMM tests on the renamed kernels (the 192 x 192
          # bf16 tiles folded into gemm_wgmma[_x2]_sm90<fmt, BN, promote, pingpong, WG>, SASS
          # identical to the tested build), then the mma.sync back end's stall samples per SASS
          # instruction (profile_ncu.sh mma-src)
    run 170 "$OUT/tests.log" "${PYTEST[@]}" --durations=5 tests/test_gemm_gpu.py
    OUT=$OUT bash scripts/profile_ncu.sh mma-src
    ;;
  promo)  # the FP8 promotion family (modes 1, 3, 4, none) at n192 and the bf16 n224 / n256
          # tiles, with the p3 / p4 / unpromoted-n192 / n224 correctness tests
    run 200 "$OUT/bench.log" python3 benchmarks/gemm.py --m 4824 38592 --fmt e4m3 \
      --backend wgmma192px2 wgmma192p3x2 wgmma192p4x2 wgmma192x2 --json "$OUT/bench_gemm_fp8.json"
    run 120 "$OUT/bench.log" python3 benchmarks/gemm.py --m 4824 9648 --fmt bf16 \
      --backend wgmma256x2 wgmma224x2 --json "$OUT/bench_gemm_bf16.json"
    run 90 "$OUT/tests.log" "${PYTEST[@]}" tests/test_gemm_gpu.py -k "p3 or p4 or n192-p0 or n224"
    ;;
  ops-check)  # the FP8 operators at the sizes that run their clustered kernels, then their
              # benchmark at M = 4824 and 38592
    run 200 "$OUT/tests.log" "${PYTEST[@]}" tests/test_pre_attention_gpu.py tests/test_out_proj_gpu.py \
      tests/test_mlp_gpu.py -k "(test_fp8_pre_attention and 4824) or (test_fp8_out_proj and int64 \
      and (4824 or 38592)) or (fused_quantization and 4824) or (test_mlp_fp8 and (4824 or 257))"
    run 200 "$OUT/bench.log" python3 benchmarks/ops_fp8.py --m 4824 38592 --json "$OUT/bench_ops_fp8.json"
    ;;
  prefetch)  # the gated-residual epilogue with the TMA-prefetched residual (out_proj, the MLP's
             # FC2) and the bf16 small-M clusters: tests, then the FP8 ops with a per-kernel
             # breakdown and the engine at M = 1 / 129
    run 60 "$OUT/tests.log" "${PYTEST[@]}" tests/test_gemm_gpu.py -k "bf16-n128-p0-x2 or deterministic"
    run 170 "$OUT/tests.log" "${PYTEST[@]}" tests/test_out_proj_gpu.py -k "fp8 and not mma_backend"
    run 150 "$OUT/tests.log" "${PYTEST[@]}" tests/test_mlp_gpu.py -k "not mma_backend and not largest"
    run 150 "$OUT/bench.log" python3 benchmarks/ops_fp8.py --m 4824 38592 --breakdown \
      --json "$OUT/bench_ops_fp8.json"
    run 60 "$OUT/bench.log" python3 benchmarks/gemm.py --m 1 129 --fmt bf16 --backend wgmma \
      --json "$OUT/bench_gemm_small.json"
    ;;
  final)  # the FC1 epilogue's branch-free division (exhaustive) and the MLP on it, the small-M
          # defaults, then the W8A8 and W4A4 operators at every centre
    run 150 "$OUT/tests.log" "${PYTEST[@]}" tests/test_mlp_gpu.py -k "swiglu_silu or \
      (test_mlp_fp8 and (129 or 257 or 4824)) or fused_y or (graph and not mma)"
    run 30 "$OUT/tests.log" "${PYTEST[@]}" tests/test_gemm_gpu.py -k "deterministic or bf16-n128"
    run 200 "$OUT/bench.log" python3 benchmarks/ops_fp8.py --breakdown --json "$OUT/bench_ops_fp8.json"
    run 120 "$OUT/bench.log" python3 benchmarks/ops_fp8.py --ops nvfp4_pre_attention \
      nvfp4_out_proj --json "$OUT/bench_ops_nvfp4.json"
    ;;
  final-check)  # the last code's remaining coverage: the FP8 pre-attention on its single-CTA
                # kernels (M <= 256, promotion mode 3), the MLP at M = 149796, the GEMM memcheck
    run 60 "$OUT/tests.log" "${PYTEST[@]}" tests/test_pre_attention_gpu.py -k \
      "test_fp8_pre_attention and not mma and not graph and not errors and not 4097 and not 4824"
    run 70 "$OUT/tests.log" "${PYTEST[@]}" tests/test_mlp_gpu.py -k largest
    run 70 "$OUT/tests.log" compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 3 python3 scripts/memcheck_gemm.py
    ;;
  m192)  # session 5 (2026-12-01): the FP8 pre-attention on 192 x 128 tiles (three consumer
         # warpgroups; FP8_TILE_M = 192) tested (every out mode, memcheck) and timed against the
         # 128-row tiles, the engine regression subset, then the BF16 pre-attention benchmark
    run 150 "$OUT/tests.log" "${PYTEST[@]}" tests/test_pre_attention_gpu.py -k \
      "m192 or (test_fp8_pre_attention and not mma and not graph and not errors and not 4824)"
    run 60 "$OUT/tests.log" "${PYTEST[@]}" tests/test_gemm_gpu.py -k "deterministic or n192-p3"
    run 90 "$OUT/tests.log" compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 3 \
      python3 -m pytest -q -p no:cacheprovider tests/test_pre_attention_gpu.py -k "m192 and 257 and bf16"
    run 150 "$OUT/bench.log" python3 benchmarks/ops_fp8.py --ops pre_attention --other-tile \
      --breakdown --json "$OUT/bench_pre_attention_fp8_m192.json"
    run 150 "$OUT/bench.log" python3 benchmarks/pre_attention.py --json "$OUT/bench_pre_attention.json"
    ;;
  s5)  # session 5, second call: the prologue with the norm weight reloaded per row (67-69
       # registers) at 2 and 3 CTAs per SM, tested and timed; the FP8 pre-attention on its new
       # default 192-row tiles (every out mode, graphs) and the 128-row ones at M = 385; timings
    run 150 "$OUT/tests.log" "${PYTEST[@]}" tests/test_prologue_gpu.py
    run 170 "$OUT/tests.log" "${PYTEST[@]}" tests/test_pre_attention_gpu.py -k \
      "(test_fp8_pre_attention and not mma and not errors and not tile_m128) or (tile_m128 and 385) \
      or (fp8_pre_attention_graph and wgmma)"
    run 90 "$OUT/bench.log" python3 benchmarks/prologue.py --ctas 2 3 --no-torch --json "$OUT/bench_prologue.json"
    run 150 "$OUT/bench.log" python3 benchmarks/ops_fp8.py --ops pre_attention --breakdown \
      --json "$OUT/bench_pre_attention_fp8.json"
    ;;
  s5-final)  # session 5, last call: the operators on the new defaults (192-row FP8
             # pre-attention tiles, the prologue at 3 CTAs per SM): the block example against
             # the host chain, the MLP at M = 4824, then the W8A8 operators and the BF16
             # pre-attention against their chains
    run 150 "$OUT/tests.log" "${PYTEST[@]}" tests/test_examples.py -k h3_block
    run 90 "$OUT/tests.log" "${PYTEST[@]}" tests/test_mlp_gpu.py -k "test_mlp_fp8 and 4824"
    run 200 "$OUT/bench.log" python3 benchmarks/ops_fp8.py --breakdown --json "$OUT/bench_ops_fp8.json"
    run 130 "$OUT/bench.log" python3 benchmarks/pre_attention.py --json "$OUT/bench_pre_attention.json"
    ;;
  s5-probe)  # session 5, after the last figures: the BF16 pre-attention at M = 38592 for
             # P = 8 / 4 / 2 / 1 (one M, four pack strides) with per-kernel times, against
             # M = 19296 at P = 2; then the BF16 / NVFP4 pre-attention and engine GPU tests on
             # the committed tree
    run 120 "$OUT/bench.log" python3 benchmarks/pre_attention.py --t 77184 --p 2 4 8 --no-compile \
      --breakdown --json "$OUT/bench_pre_attention_m38592.json"
    run 90 "$OUT/bench.log" python3 benchmarks/pre_attention.py --p 1 2 --no-compile --breakdown \
      --json "$OUT/bench_pre_attention_p1p2.json"
    run 300 "$OUT/tests.log" "${PYTEST[@]}" tests/test_pre_attention_gpu.py tests/test_gemm_gpu.py \
      -k "not fp8_pre_attention"
    ;;
  # The A/B modes below time an older tree in the same call. Make it on the CPU machine with
  #   mkdir .abtree && git archive REV | tar -x -C .abtree &&
  #   (cd .abtree && H3CUPY_CACHE_DIR=$PWD/.h3cache PYTHONPATH=. python scripts/prebuild_cache.py sm_90a)
  # and carry it (with .h3cache) to the device; .abtree/ and .abtree2/ are ignored by git.
  s6-ab)  # session 6, first call: the pre-attention epilogue with its row operands loaded early
          # (one memory round trip per tile) and paired bf16 roundings. Quick correctness first,
          # then each op timed on this tree and on the previous commit's (.abtree/, an export of
          # it with its own prebuilt cache, carried), in the same call.
    run 150 "$OUT/tests.log" "${PYTEST[@]}" tests/test_pre_attention_gpu.py -k \
      "(test_fp8_pre_attention and (4824 or 129) and not mma and not errors) or \
      (test_bf16_pre_attention and (4097 or 129) and not mma)"
    run 150 "$OUT/bench.log" python3 benchmarks/ops_fp8.py --ops pre_attention nvfp4_pre_attention \
      --json "$OUT/bench_pre_attention_fp8_new.json"
    run 130 "$OUT/bench.log" python3 benchmarks/pre_attention.py --json "$OUT/bench_pre_attention_bf16_new.json"
    if [ -d .abtree ]; then
      ( cd .abtree && export PYTHONPATH=$PWD H3CUPY_CACHE_DIR=$PWD/.h3cache &&
        run 100 "$OUT/bench.log" python3 benchmarks/ops_fp8.py --ops pre_attention \
          nvfp4_pre_attention --no-compile --json "$OUT/bench_pre_attention_fp8_old.json" &&
        run 100 "$OUT/bench.log" python3 benchmarks/pre_attention.py --no-compile \
          --json "$OUT/bench_pre_attention_bf16_old.json" )
    fi
    ;;
  s6-bf16)  # session 6: the BF16 pre-attention without the wgmma serialization (the mainloop's
            # fragment fence), its tests, then timed against the previous commit (.abtree/) and
            # against this tree without the Early hook (.abtree2/), in the same call
    run 200 "$OUT/tests.log" "${PYTEST[@]}" tests/test_pre_attention_gpu.py -k \
      "test_bf16_pre_attention and not mma and not errors and not 38592"
    run 130 "$OUT/bench.log" python3 benchmarks/pre_attention.py --json "$OUT/bench_pre_attention_bf16_new.json"
    for tree in .abtree .abtree2; do
      [ -d $tree ] && ( cd $tree && export PYTHONPATH=$PWD H3CUPY_CACHE_DIR=$PWD/.h3cache &&
        run 100 "$OUT/bench.log" python3 benchmarks/pre_attention.py --no-compile \
          --json "$OUT/bench_pre_attention_bf16_${tree#.}.json" )
    done
    ;;
  s6-final)  # session 6, last call: the pre-attention ops on the committed tree (same-run ratios
              # for the README), and the examples' block check
    run 150 "$OUT/tests.log" "${PYTEST[@]}" tests/test_examples.py -k h3_block
    run 150 "$OUT/bench.log" python3 benchmarks/ops_fp8.py --ops pre_attention nvfp4_pre_attention \
      --json "$OUT/bench_pre_attention_fp8.json"
    run 130 "$OUT/bench.log" python3 benchmarks/pre_attention.py --json "$OUT/bench_pre_attention_bf16.json"
    ;;
  s7-fused)  # session 7: the single-launch out_proj / FC2 with the first round's rows quantized by
              # the consumer warps and the spare warps' loads batched: one smoke test, the W8A8
              # out_proj and MLP benchmarks (both forms, and the two-launch form without its
              # quantization launch), then the fused forms' tests
    # a hang here (a persistent kernel that never finishes) must not eat the call: stop at once
    run 45 "$OUT/tests.log" "${PYTEST[@]}" tests/test_out_proj_gpu.py -k "fused_quantization and 4824"
    [ "$status" = 0 ] || exit 1
    run 90 "$OUT/bench.log" python3 scripts/probe_fused.py --m 4824 38592 --json "$OUT/probe_fused.json"
    run 260 "$OUT/bench.log" python3 benchmarks/ops_fp8.py --ops out_proj mlp \
      --json "$OUT/bench_ops_fused.json"
    run 220 "$OUT/tests.log" "${PYTEST[@]}" --durations=5 tests/test_out_proj_gpu.py \
      tests/test_mlp_gpu.py -k "fused and not (fused_quantization and 4824)"
    ;;
  s14-b)  # programmatic dependent launch (launch.PDL, on by default): its own tests (each op
          # with it off, bits on / off / graph), the ops' main tests with it on (the GEMM reading
          # a poisoned workspace before the prologue's end would fail them), then the BF16
          # pre-attention at the four centres with the h3_no_pdl form beside the default
    run 330 "$OUT/tests.log" "${PYTEST[@]}" --durations=8 tests/test_pdl_gpu.py \
      tests/test_pre_attention_gpu.py tests/test_out_proj_gpu.py tests/test_mlp_gpu.py \
      tests/test_gemm_gpu.py -k "test_pdl_gpu or test_bf16_pre_attention[129] or \
      test_bf16_pre_attention[4824] or graph_and_determinism or test_fp8_pre_attention[4824-bf16] \
      or test_fp8_pre_attention[257-e4m3] or test_fp8_pre_attention_graph or tile_setting or \
      (fp8_out_proj and not mma and (4824 or graph or capture or two_launch)) or \
      test_mlp_fp8[4824] or test_mlp_fp8[257] or (test_mlp_fp8_graph and not mma) or \
      (test_gemm_wgmma_tail_split and 4824x5376x7168)"
    [ "$status" = 0 ] || exit 1
    smi_start
    run 200 "$OUT/bench.log" python3 benchmarks/pre_attention.py --json "$OUT/bench_pre_attention_bf16.json"
    smi_stop
    ;;
  s14-g)  # launch.PDL off by default, the prologue's late signal: the PDL tests (each op with it
          # on and off, bits) and the ops' default tests at M = 4824 on the final kernels
    run 230 "$OUT/tests.log" "${PYTEST[@]}" --durations=5 tests/test_pdl_gpu.py \
      tests/test_pre_attention_gpu.py -k "test_pdl_gpu or test_bf16_pre_attention[4824] or \
      test_fp8_pre_attention[4824-bf16]"
    ;;
  s14-f)  # testing.bench_graphs takes the forms in a fresh random order each round (a rotated
          # order gave every form a fixed predecessor: at M = 38592 the heavy forms ran slower
          # after each other); the issue figures again, 20 rounds: the BF16 pre-attention at the
          # four centres and the three FP8 operators at the four centres (h3_no_pdl beside each)
    smi_start
    run 150 "$OUT/bench.log" python3 benchmarks/pre_attention.py --reps 20 \
      --json "$OUT/bench_pre_attention_bf16.json"
    run 290 "$OUT/bench.log" python3 benchmarks/ops_fp8.py --ops pre_attention out_proj mlp \
      --reps 20 --json "$OUT/bench_ops_fp8.json"
    smi_stop
    ;;
  s14-e)  # the prologue signals its dependents on each CTA's last row instead of at its start:
          # the BF16 pre-attention at the four centres and the FP8 pre-attention and MLP at
          # 4824 / 9648, h3 (PDL) against h3_no_pdl, graph replays, 20 rounds
    smi_start
    run 200 "$OUT/bench.log" python3 benchmarks/pre_attention.py --reps 20 \
      --json "$OUT/bench_pre_attention_bf16.json"
    run 200 "$OUT/bench.log" python3 benchmarks/ops_fp8.py --ops pre_attention mlp \
      --m 4824 9648 --reps 20 --json "$OUT/bench_ops_fp8.json"
    smi_stop
    ;;
  # (s14-b .. s14-e ran with PDL on by default and printed the PDL-off form as h3_no_pdl; the
  # benchmarks now default to PDL off and print the PDL-on form as h3_pdl)
  s14-d)  # after s14-b stopped on a harness artifact (the MLP's M = 4824 graph check compared
          # workspace_flags words no form writes; fixed in verify.py): that test again, then
          # s14-b's BF16 pre-attention benchmark and the FP8 operators at M = 4824 / 9648, each
          # with the h3_no_pdl form beside the default (graph replays)
    run 60 "$OUT/tests.log" "${PYTEST[@]}" tests/test_pdl_gpu.py -k "mlp"
    smi_start
    run 200 "$OUT/bench.log" python3 benchmarks/pre_attention.py --json "$OUT/bench_pre_attention_bf16.json"
    run 280 "$OUT/bench.log" python3 benchmarks/ops_fp8.py --ops pre_attention out_proj mlp \
      --m 4824 9648 --json "$OUT/bench_ops_fp8.json"
    smi_stop
    ;;
  s14-a)  # session 14's first call: the benchmark-only 192 x 192 bf16 tiles (three consumer
          # warpgroups; cuBLAS's own bf16 tile) tested, then timed with energy beside the n256
          # pairs default and torch.mm at QKV / FC1; then s14-first's FP8 n128 p4 (below)
    run 150 "$OUT/tests.log" "${PYTEST[@]}" --durations=5 tests/test_gemm_gpu.py
    [ "$status" = 0 ] || exit 1
    smi_start
    run 170 "$OUT/bench.log" python3 benchmarks/gemm.py --fmt bf16 --shapes qkv fc1 \
      --m 4824 9648 38592 --backend wgmma wgmma192m192 wgmma192m192x2 --reps 10 --energy \
      --json "$OUT/bench_gemm_bf16_m192.json"
    run 250 "$OUT/bench.log" python3 benchmarks/gemm.py --fmt e4m3 --shapes qkv fc1 o fc2 \
      --m 4824 38592 --backend wgmma wgmma128p3 wgmma128p4 --reps 10 --energy \
      --json "$OUT/bench_gemm_fp8_n128.json"
    smi_stop
    ;;
  s14-first)  # written in session 13, unrun: the FP8 engine on cuBLAS's own FP8 shape (128 x 128
              # single-CTA tiles, 6-stage ring) with promotion spans of two and of four k-tiles
              # (the new benchmark-only e4m3 n128 p4 x1) beside the n192 default: the new
              # variant's tests (K up to 14336, stop on a failure), then graph replays and
              # sustained windows (cycles, clock, energy) at four shapes against _scaled_mm
    run 90 "$OUT/tests.log" "${PYTEST[@]}" tests/test_gemm_gpu.py -k "wgmma_variants and e4m3-n128-p4"
    [ "$status" = 0 ] || exit 1
    smi_start
    run 300 "$OUT/bench.log" python3 benchmarks/gemm.py --fmt e4m3 --shapes qkv fc1 o fc2 \
      --m 4824 38592 --backend wgmma wgmma128p3 wgmma128p4 --reps 10 --energy \
      --json "$OUT/bench_gemm_fp8_n128.json"
    smi_stop
    ;;
  s13-probe)  # the engine probe on the new FP8 pre-attention default (128 x 192 pairs) beside
              # the plain FP8 engine on the same product, the 192 x 128 tiles, out_proj, FC1 and
              # the BF16 ops: each kernel's mainloop, epilogue and operand waits per unit
    smi_start
    run 240 "$OUT/probe.log" python3 scripts/probe_engine.py --m 4824 38592 --reps 5 --cases \
      fp8_pre_attention_n192 fp8_pre_attention_m192 fp8_gemm_qkv out_proj_fused out_proj_gemm \
      fp8_gemm_o mlp_fc1 bf16_pre_attention bf16_gemm_qkv --json "$OUT/probe_engine.json"
    smi_stop
    ;;
  s13-ab)  # session 13's diagnostic A/Bs (H3_WG_STAGGER_NS, H3_MT_PRODUCE), measured and then
           # removed: run this mode from commit 877d898 (results ab_*_s13_c_*, NOTES.md)
    echo "s13-ab: the A/B builds were removed after their run; check out 877d898 to repeat it" >&2
    exit 2
    ;;
  s13-final)  # FP8_TILE = "n192" the default: the FP8 pre-attention's wgmma-path tests (every
              # tile form, out mode and M; graphs), memcheck on the default at M = 257, the op
              # against each other tile form and torch.compile at the four centres (sustained
              # windows at 4824 / 38592), then the mma.sync back end's ncu sections (issue #3)
    run 330 "$OUT/tests.log" "${PYTEST[@]}" --durations=5 tests/test_pre_attention_gpu.py -k \
      "test_fp8_pre_attention and not mma_backend and not mma]"
    run 60 "$OUT/tests.log" compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 3 \
      python3 -m pytest -q -p no:cacheprovider tests/test_pre_attention_gpu.py -k \
      "test_fp8_pre_attention[257-e4m3]"
    smi_start
    run 110 "$OUT/bench.log" python3 benchmarks/ops_fp8.py --ops pre_attention --m 4824 38592 \
      --other-tile --reps 20 --energy --json "$OUT/bench_ops_energy.json"
    run 80 "$OUT/bench.log" python3 benchmarks/ops_fp8.py --ops pre_attention --m 9648 19296 \
      --other-tile --reps 20 --json "$OUT/bench_ops.json"
    smi_stop
    run 100 "$OUT/ncu.log" bash scripts/profile_ncu.sh mma-tma
    ;;
  s13-n192)  # session 13's first call: the 128 x 192 pairs behind pre_attention.FP8_TILE =
             # "n192" before they became the default (their test has since become the default
             # op's): run this mode from commit a39c434 (results *_s13_a_*)
    echo "s13-n192: superseded by s13-final; check out a39c434 to repeat it" >&2
    exit 2
    ;;
  s12-e)  # the operators against torch.compile in sustained windows as well as graph replays:
          # the BF16 pre-attention at the four centres, the FP8 ops at M = 9648 / 19296 (4824 /
          # 38592: s12-c)
    smi_start
    run 200 "$OUT/bench.log" python3 benchmarks/pre_attention.py --energy --reps 10 \
      --json "$OUT/bench_pre_attention.json"
    run 250 "$OUT/bench.log" python3 benchmarks/ops_fp8.py --m 9648 19296 --reps 10 --energy \
      --json "$OUT/bench_ops.json"
    smi_stop
    ;;
  s12-c)  # the tile orders' DRAM bytes (ncu), then each FP8 op on single CTAs against clusters of
          # two in sustained windows (cycles, clock, energy) as well as graph replays
    run 170 "$OUT/ncu.log" bash scripts/profile_ncu.sh order
    smi_start
    for op in pre_attention out_proj mlp; do
      run 140 "$OUT/bench.log" python3 benchmarks/ops_fp8.py --ops $op --m 4824 38592 --reps 10 \
        --other-cluster --energy --json "$OUT/bench_ops_$op.json"
    done
    smi_stop
    ;;
  s12-b)  # where the engine's extra energy per call goes: bytes moved (ncu) against cuBLAS, the
          # FP8 tile variants' cycles and energy, and the tile order grouped by 16 / 32 M-tiles
    run 240 "$OUT/ncu.log" bash scripts/profile_ncu.sh traffic
    smi_start
    run 120 "$OUT/bench.log" python3 benchmarks/gemm.py --fmt e4m3 --shapes qkv fc1 --m 38592 \
      --backend wgmma wgmma192p3x2 wgmma192x2 wgmma128p3 --reps 5 --energy \
      --json "$OUT/bench_gemm_fp8_variants.json"
    run 100 "$OUT/bench.log" python3 scripts/probe_engine.py --ab group16 --energy --m 38592 4824 \
      --reps 10 --json "$OUT/ab_group16.json"
    run 60 "$OUT/bench.log" python3 scripts/probe_engine.py --ab group32 --energy --m 38592 \
      --reps 10 --json "$OUT/ab_group32.json"
    smi_stop
    ;;
  s12-a)  # session 12's first call: the 192-row FP8 pre-attention without its tail split (tests,
          # then timed on / off), and clocks, cycles and energy per call (bench_graphs' sustained
          # windows) of the FP8 engine against _scaled_mm, the bf16 engine and mma.sync against
          # cuBLAS, and of the FP8 pre-attention's forms
    run 80 "$OUT/tests.log" "${PYTEST[@]}" --durations=5 tests/test_pre_attention_gpu.py -k \
      "test_fp8_pre_attention_no_tail_split and 192-"
    [ "$status" = 0 ] || exit 1
    smi_start
    run 150 "$OUT/bench.log" python3 benchmarks/gemm.py --fmt e4m3 --shapes qkv o fc1 fc2 \
      --m 4824 38592 --backend wgmma --reps 10 --energy --json "$OUT/bench_gemm_fp8.json"
    run 60 "$OUT/bench.log" python3 benchmarks/gemm.py --fmt bf16 --shapes qkv --m 4824 38592 \
      --backend wgmma mma_tma --reps 5 --energy --json "$OUT/bench_gemm_bf16.json"
    run 150 "$OUT/bench.log" python3 benchmarks/ops_fp8.py --ops pre_attention --m 4824 38592 \
      --reps 20 --energy --json "$OUT/bench_ops_energy.json"
    run 120 "$OUT/bench.log" python3 benchmarks/ops_fp8.py --ops pre_attention --m 9648 19296 \
      --reps 20 --json "$OUT/bench_ops.json"
    smi_stop
    ;;
  s12-split)  # (written in session 11; its tests ran in s12-a) the 192-row FP8 pre-attention's tail
               # split, tested off and timed on / off with 20 replays at the four centres
    run 80 "$OUT/tests.log" "${PYTEST[@]}" --durations=5 tests/test_pre_attention_gpu.py -k \
      "test_fp8_pre_attention_no_tail_split and 192-"
    [ "$status" = 0 ] || exit 1
    smi_start
    run 200 "$OUT/bench.log" python3 benchmarks/ops_fp8.py --ops pre_attention \
      --m 4824 9648 19296 38592 --reps 20 --json "$OUT/bench_ops.json"
    smi_stop
    ;;
  s11-check)  # the last coverage of the single-CTA default: the FP8 out_proj at 4097 / 4824 (both
               # index types, the tail split on and off), the GEMM memcheck (every gemm_wgmma
               # variant), the 192-row FP8 pre-attention under memcheck at M = 257
    run 120 "$OUT/tests.log" "${PYTEST[@]}" --durations=5 tests/test_out_proj_gpu.py -k \
      "test_fp8_out_proj[4097 or test_fp8_out_proj[4824 or tail_split[4097 or tail_split[4824"
    run 80 "$OUT/tests.log" compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 3 python3 scripts/memcheck_gemm.py
    run 90 "$OUT/tests.log" compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 3 \
      python3 -m pytest -q -p no:cacheprovider tests/test_pre_attention_gpu.py -k "test_fp8_pre_attention[257-bf16]"
    ;;
  s11-final)  # session 11, FP8_CLUSTER = 1 the default: the engine's FP8 tests as the smoke test,
               # the FP8 ops against torch.compile with both cluster settings, the FP8 engine
               # against _scaled_mm (and its clustered form), the out_proj tests the x1 run left
    run 100 "$OUT/tests.log" "${PYTEST[@]}" --durations=5 tests/test_gemm_gpu.py -k \
      "tail_split or e4m3_scaled or deterministic"
    [ "$status" = 0 ] || exit 1
    smi_start
    run 240 "$OUT/bench.log" python3 benchmarks/ops_fp8.py --ops out_proj mlp pre_attention \
      --m 4824 9648 19296 38592 --other-cluster --json "$OUT/bench_ops.json"
    run 120 "$OUT/bench.log" python3 benchmarks/gemm.py --fmt e4m3 --shapes o fc2 qkv fc1 \
      --m 4824 9648 38592 --backend wgmma wgmma192p3x2 --reps 10 --json "$OUT/bench_gemm_fp8.json"
    smi_stop
    run 200 "$OUT/tests.log" "${PYTEST[@]}" --durations=5 tests/test_out_proj_gpu.py -k \
      "fp8 and not mma and (38592 or aliasing or deterministic or capture or graph or two_launch)"
    ;;
  s11-final-b)  # the rest of the FP8 ops' tests on the single-CTA default: the MLP (every M above
                # 256, aliasing, no tail split, graphs) and the FP8 pre-attention's graphs
    run 300 "$OUT/tests.log" "${PYTEST[@]}" --durations=5 tests/test_mlp_gpu.py -k \
      "(test_mlp_fp8 and (257 or 4097 or largest or aliasing or no_tail or graph)) and not mma"
    run 120 "$OUT/tests.log" "${PYTEST[@]}" --durations=5 tests/test_pre_attention_gpu.py -k \
      "test_fp8_pre_attention_graph"
    ;;
  s11-final-c)  # the flags layout mend (the ready words reserved in both forms): the MLP at its
                 # largest M (where the split partials overlapped them), the forms with a caller's
                 # workspace_flags, graphs and own-scratch captures
    run 300 "$OUT/tests.log" "${PYTEST[@]}" --durations=5 tests/test_mlp_gpu.py tests/test_out_proj_gpu.py -k \
      "largest or test_mlp_fp8[4824] or fused_y_quantization or (test_mlp_fp8_graph and not mma) or (fp8_out_proj and (two_launch or capture_own or deterministic or (graph and not mma)))"
    ;;
  s11-x1)  # session 11: single CTAs (gemm.FP8_CLUSTER / BF16_CLUSTER = 1) against clusters of
            # two on the same tiles, in every FP8 op, the BF16 pre-attention and the bf16 engine;
            # then the tests of the single-CTA kernels
    run 60 "$OUT/tests.log" "${PYTEST[@]}" tests/test_gemm_gpu.py -k "x1"
    [ "$status" = 0 ] || exit 1
    smi_start
    run 240 "$OUT/bench.log" python3 benchmarks/ops_fp8.py --ops out_proj mlp pre_attention \
      --m 4824 9648 19296 38592 --other-cluster --json "$OUT/bench_ops.json"
    run 90 "$OUT/bench.log" python3 benchmarks/gemm.py --fmt bf16 --shapes qkv o fc1 fc2 --m 4824 9648 \
      --backend wgmma wgmma256 wgmma224 --reps 10 --json "$OUT/bench_gemm_bf16.json"
    run 120 "$OUT/bench.log" python3 benchmarks/pre_attention.py --json "$OUT/bench_pre_attention.json"
    smi_stop
    run 300 "$OUT/tests.log" "${PYTEST[@]}" -rA --durations=10 tests/test_out_proj_gpu.py \
      tests/test_mlp_gpu.py tests/test_pre_attention_gpu.py -k "other_cluster"
    ;;
  s11-waits)  # next session (written in session 10, unrun): what the mainloop's operand waits are.
              # The new single-CTA FP8 n192 variant's tests (smoke), then the probe (with the
              # waits in each unit's first stages split out) on the default FP8 GEMM and on the
              # same tiles without the cluster, and the engine benchmark of both forms
    run 60 "$OUT/tests.log" "${PYTEST[@]}" tests/test_gemm_gpu.py -k "e4m3-n192-p3-x1 or (e4m3-n192-p3-x2 and 300x1000)"
    [ "$status" = 0 ] || exit 1
    smi_start
    run 90 "$OUT/probe.log" python3 scripts/probe_engine.py --m 4824 9648 --reps 5 \
      --cases fp8_gemm_o fp8_gemm_o_x1 bf16_gemm_o out_proj_gemm --json "$OUT/probe_engine.json"
    run 90 "$OUT/bench.log" python3 benchmarks/gemm.py --fmt e4m3 --shapes o fc2 qkv fc1 --m 4824 9648 \
      --backend wgmma wgmma192p3 --reps 10 --json "$OUT/bench_gemm_fp8.json"
    smi_stop
    run 100 "$OUT/tests.log" "${PYTEST[@]}" tests/test_pre_attention_gpu.py -k "test_bf16_pre_attention[4824]"
    run 200 "$OUT/bench.log" python3 benchmarks/pre_attention.py --json "$OUT/bench_pre_attention.json"
    ;;
  s10-stage5p)  # session 10, after s10-stage5: the engine probe on the 5-stage build's GEMMs and
                # on the default's, same run (do 5 stages cut the mainloop's operand waits?)
    run 60 "$OUT/probe.log" python3 scripts/probe_engine.py --m 4824 --reps 3 --probe-on stage5 \
      --cases fp8_gemm_o bf16_gemm_o --json "$OUT/probe_stage5.json"
    run 60 "$OUT/probe.log" python3 scripts/probe_engine.py --m 4824 --reps 3 \
      --cases fp8_gemm_o bf16_gemm_o --json "$OUT/probe_default.json"
    ;;
  s10-stage5)  # session 10, last call: the engine probe with the mainloop's waits (operands not
               # landed / no free stage), and the plain FP8 GEMM with a 5-stage ring (8 KiB of
               # epilogue staging per warpgroup) against the default in one run, same bytes checked
    run 60 "$OUT/ab.log" python3 scripts/probe_engine.py --ab stage5 --m 4824 9648 --reps 10 \
      --json "$OUT/ab_stage5.json"
    run 90 "$OUT/probe.log" python3 scripts/probe_engine.py --m 4824 --reps 3 --json "$OUT/probe_engine.json"
    run 60 "$OUT/bench.log" python3 benchmarks/ops_fp8.py --ops pre_attention --m 4824 9648 --no-compile \
      --json "$OUT/bench_pre_fp8.json"
    ;;
  s10-ab)  # session 10, fifth call: the epilogue vectors against the same kernels built without
           # them (-DH3_NO_EPI_VEC) in one run, then the two MLP graph tests s10-epi2 left
    smi_start
    run 200 "$OUT/ab.log" python3 scripts/probe_engine.py --ab --m 4824 9648 --reps 10 \
      --json "$OUT/ab_epi_vec.json"
    smi_stop
    run 160 "$OUT/tests.log" "${PYTEST[@]}" -rA --durations=5 tests/test_mlp_gpu.py -k "graph and (fused or mma)"
    ;;
  s10-epi2)  # session 10, fourth call: s10-epi's measurements (its two calls passed the FP8
             # engine tests, the first 34 FP8 out_proj tests and the first 13 MLP tests, then met
             # their stage limits), then the remaining out_proj and MLP tests, verbose
    s10_measure
    run 100 "$OUT/tests.log" "${PYTEST[@]}" -v --durations=5 tests/test_out_proj_gpu.py -k \
      "fp8 and (mma_backend or graph)"
    run 100 "$OUT/tests.log" "${PYTEST[@]}" -v --durations=5 tests/test_mlp_gpu.py -k "graph or mma_backend"
    ;;
  s10-epi)  # session 10, third call: the epilogues' row / column vectors through shared memory
            # (cp.async during the mainloop), the FP8 gated residual in bf16x2 over the staged
            # residual, the FP8 n192 plain epilogue in one pass: FP8 engine tests (smoke), every
            # FP8 out_proj and MLP test, then the engine probe, the ops and the FP8 engine
    run 100 "$OUT/tests.log" "${PYTEST[@]}" --durations=3 tests/test_gemm_gpu.py -k "wgmma_variants and e4m3 and 192"
    [ "$status" = 0 ] || exit 1
    run 200 "$OUT/tests.log" "${PYTEST[@]}" --durations=3 tests/test_mlp_gpu.py -k "not mma_backend and not errors and not exhaustive"
    [ "$status" = 0 ] || exit 1
    s10_measure
    # (the first s10-epi call passed the first 34 of these, through capture_own_scratch, then
    # met its 120 s stage limit: the rest here)
    run 100 "$OUT/tests.log" "${PYTEST[@]}" --durations=3 tests/test_out_proj_gpu.py -k \
      "fp8 and (mma_backend or graph)"
    ;;
  s10-probe)  # session 10, second call: the engine probe (fixed: its counters now have C linkage)
              # and the FP8 pre-attention's 192-row tiles with / without the tail split
    run 60 "$OUT/tests.log" "${PYTEST[@]}" tests/test_gemm_gpu.py -k "wgmma_variants and 300x1000"
    [ "$status" = 0 ] || exit 1
    smi_start
    run 200 "$OUT/probe.log" python3 scripts/probe_engine.py --m 4824 38592 --reps 5 \
      --json "$OUT/probe_engine.json"
    run 100 "$OUT/bench.log" python3 benchmarks/ops_fp8.py --ops pre_attention --m 4824 9648 \
      --no-compile --json "$OUT/bench_ops.json"
    smi_stop
    ;;
  s10-a)  # session 10, first call (branch next/tile-order-per-role + the bf16 224 / 256-column
          # tail split): every engine test (the new bf16 tail-split cases included) as the smoke
          # test, the FP8 pre-attention (192-row tiles now with the split), the out_proj tests
          # refactored in session 9 (determinism, capture), then the engine probe (epilogue share
          # of each op's consumer time), the ops at 4824 / 38592, the bf16 engine A/B (split on /
          # off, forced 224 / 256) and the FP8 QKV / FC1 engine against cuBLAS's own tile shape
    run 150 "$OUT/tests.log" "${PYTEST[@]}" --durations=5 tests/test_gemm_gpu.py -k "wgmma"
    [ "$status" = 0 ] || exit 1
    run 150 "$OUT/tests.log" "${PYTEST[@]}" --durations=5 tests/test_pre_attention_gpu.py -k \
      "(test_fp8_pre_attention and (257 or 4097 or 4824)) or test_bf16_pre_attention[4824] or (graph and wgmma)"
    run 100 "$OUT/tests.log" "${PYTEST[@]}" --durations=5 tests/test_out_proj_gpu.py tests/test_mlp_gpu.py -k \
      "(test_fp8_out_proj and (4824 or 38592) and int32) or tail_split_deterministic or capture_own_scratch or test_mlp_fp8[4824]"
    [ "$status" = 0 ] || exit 1
    smi_start
    run 110 "$OUT/probe.log" python3 scripts/probe_engine.py --m 4824 38592 --reps 5 \
      --json "$OUT/probe_engine.json"
    run 130 "$OUT/bench.log" python3 benchmarks/ops_fp8.py --ops pre_attention out_proj --m 4824 38592 \
      --other-tile --json "$OUT/bench_ops.json"
    run 70 "$OUT/bench.log" python3 benchmarks/gemm.py --fmt bf16 --shapes qkv o fc2 --m 4824 9648 \
      --backend wgmma wgmma_notail wgmma224x2 wgmma256x2 --reps 10 --json "$OUT/bench_gemm_bf16.json"
    run 50 "$OUT/bench.log" python3 benchmarks/gemm.py --fmt e4m3 --shapes qkv fc1 --m 4824 38592 \
      --backend wgmma wgmma128p3 --reps 10 --json "$OUT/bench_gemm_fp8.json"
    smi_stop
    ;;
  s10-order)  # next session, branch next/tile-order-per-role (unrun): the engine forms its tile
              # order inside each role and the consumers' unit count at each loop test, so the
              # 192-row FP8 pre-attention kernel takes the tail split without spilling. Tests of
              # every engine kernel family first, then the FP8 pre-attention and the engine at
              # M = 4824 / 38592 (compare with s9's figures, or A/B against main in .abtree/)
    run 120 "$OUT/tests.log" "${PYTEST[@]}" tests/test_gemm_gpu.py -k "wgmma"
    [ "$status" = 0 ] || exit 1
    run 200 "$OUT/tests.log" "${PYTEST[@]}" tests/test_pre_attention_gpu.py -k \
      "(test_fp8_pre_attention and (257 or 4097 or 4824)) or test_bf16_pre_attention[4824] or (graph and wgmma)"
    run 120 "$OUT/tests.log" "${PYTEST[@]}" tests/test_out_proj_gpu.py tests/test_mlp_gpu.py -k \
      "(test_fp8_out_proj and (4824 or 38592) and int32) or capture_own_scratch or test_mlp_fp8[4824]"
    run 150 "$OUT/bench.log" python3 benchmarks/ops_fp8.py --ops pre_attention out_proj mlp \
      --m 4824 38592 --other-tile --json "$OUT/bench_ops.json"
    ;;
  s9-energy)  # session 9: the benchmarks' energy pass (testing.EnergyMeter, NVML's energy counter)
              # on the FP8 out_proj and the MLP against their torch.compile chains
    smi_start
    run 200 "$OUT/bench.log" python3 benchmarks/ops_fp8.py --ops out_proj mlp --m 4824 38592 --energy \
      --json "$OUT/bench_ops_energy.json"
    smi_stop
    ;;
  s9-review)  # session 9, last call: the tests of the changed kernels that the earlier calls did not
              # run on the final tree (the tail split on by default everywhere it is built)
    run 110 "$OUT/tests.log" "${PYTEST[@]}" tests/test_out_proj_gpu.py -k \
      "(test_fp8_out_proj and int32 and not 4824) or two_launch or aliasing"
    run 100 "$OUT/tests.log" "${PYTEST[@]}" tests/test_gemm_gpu.py -k "wgmma and not tail_split"
    run 140 "$OUT/tests.log" "${PYTEST[@]}" --durations=5 tests/test_mlp_gpu.py -k \
      "(test_mlp_fp8 and not 4824 and not mma and not graph and not largest and not silu) or no_tail"
    run 130 "$OUT/tests.log" "${PYTEST[@]}" --durations=5 tests/test_pre_attention_gpu.py -k \
      "test_bf16_pre_attention[1] or test_bf16_pre_attention[127] or test_bf16_pre_attention[128] or test_bf16_pre_attention[257] or test_bf16_pre_attention[4097] or test_bf16_pre_attention[38592] or positions or test_fp8_pre_attention[257-bf16]"
    ;;
  s9-pre)  # session 9: the tail split in the bf16 n224 / n256 engine tiles (the __syncwarp-chunked
           # partial sums; NOTE: gemm_wgmma's host never split those tiles, so its bf16 A/B below
           # timed one kernel twice, NOTES.md session 9) and in the BF16 / two-warpgroup FP8
           # pre-attention kernels: smoke tests,
           # their tests, then the BF16 pre-attention (with and without the split, vs compile),
           # the bf16 engine at M = 4824 / 9648 and the FP8 pre-attention's two tiles
    run 90 "$OUT/tests.log" "${PYTEST[@]}" tests/test_gemm_gpu.py -k "bf16-n256 or bf16-n224 or (tail_split and 7168-True)"
    [ "$status" = 0 ] || exit 1
    run 150 "$OUT/tests.log" "${PYTEST[@]}" --durations=5 tests/test_pre_attention_gpu.py -k \
      "test_bf16_pre_attention[129] or test_bf16_pre_attention[4824] or no_tail or test_bf16_pre_attention_graph or (test_fp8_pre_attention and (4824 or 129-bf16 or 1-bf16)) or (tile_m128 and 4097) or (test_fp8_pre_attention_graph and wgmma)"
    [ "$status" = 0 ] || exit 1
    smi_start
    run 150 "$OUT/bench.log" python3 benchmarks/pre_attention.py --json "$OUT/bench_pre_attention.json"
    run 90 "$OUT/bench.log" python3 benchmarks/gemm.py --fmt bf16 --shapes qkv o fc2 --m 4824 9648 \
      --backend wgmma wgmma_notail --reps 10 --json "$OUT/bench_gemm_bf16.json"
    run 90 "$OUT/bench.log" python3 benchmarks/ops_fp8.py --ops pre_attention --m 4824 9648 \
      --other-tile --json "$OUT/bench_ops_pre.json"
    smi_stop
    ;;
  s9-final)  # session 9, last call: the MLP's flag tests on the final tree (both back ends, graphs),
             # the out_proj capture test, then the FP8 out_proj / MLP against torch.compile and the
             # FP8 engine at the O / FC2 shapes with and without the tail split (clock logged)
    run 60 "$OUT/tests.log" "${PYTEST[@]}" tests/test_mlp_gpu.py -k "errors"
    [ "$status" = 0 ] || exit 1
    run 150 "$OUT/tests.log" "${PYTEST[@]}" --durations=5 tests/test_mlp_gpu.py tests/test_out_proj_gpu.py -k \
      "test_mlp_fp8_graph or test_mlp_fp8[4824] or fused_y_quantization[129] or capture_own_scratch"
    smi_start
    run 200 "$OUT/bench.log" python3 benchmarks/ops_fp8.py --ops out_proj mlp --m 4824 9648 19296 38592 \
      --json "$OUT/bench_ops.json"
    run 100 "$OUT/bench.log" python3 benchmarks/gemm.py --fmt e4m3 --shapes o fc2 --m 4824 9648 \
      --backend wgmma wgmma_notail --reps 10 --json "$OUT/bench_gemm_fp8.json"
    smi_stop
    ;;
  s9-tail)  # session 9: the tail split in the plain engine's FP8 / n128 variants (gemm.TAIL_SPLIT)
            # and the engine's re-decoded tail units: its GEMM tests first, then the out_proj /
            # MLP tests it touches, then the FP8 engine at every H3 shape with and without it
            # against _scaled_mm (clock and power logged)
    run 90 "$OUT/tests.log" "${PYTEST[@]}" tests/test_gemm_gpu.py -k "tail_split"
    [ "$status" = 0 ] || exit 1
    run 150 "$OUT/tests.log" "${PYTEST[@]}" --durations=5 tests/test_gemm_gpu.py -k "wgmma_variants or deterministic"
    run 120 "$OUT/tests.log" "${PYTEST[@]}" tests/test_out_proj_gpu.py -k "capture_own_scratch or (tail_split and 4824) or graph"
    run 120 "$OUT/tests.log" "${PYTEST[@]}" tests/test_mlp_gpu.py -k "errors or (graph and not mma) or test_mlp_fp8[4824]"
    smi_start
    run 240 "$OUT/bench.log" python3 benchmarks/gemm.py --fmt e4m3 --shapes o fc2 qkv fc1 \
      --m 4824 9648 19296 38592 --backend wgmma wgmma_notail --reps 10 --json "$OUT/bench_gemm_fp8.json"
    smi_stop
    ;;
  s9-ws)  # session 9: the tail split on by default, its workspace in workspace_flags or the op's
          # scratch (per stream eager, per capture in graphs): the capture test first, then the
          # FP8 out_proj / MLP tests that the change touches, then the benchmark at every centre
          # (with and without the split, against torch.compile; clock and power logged)
    run 60 "$OUT/tests.log" "${PYTEST[@]}" tests/test_out_proj_gpu.py -k "capture_own_scratch"
    [ "$status" = 0 ] || exit 1
    run 150 "$OUT/tests.log" "${PYTEST[@]}" --durations=5 tests/test_out_proj_gpu.py -k \
      "fp8 and not mma and not capture and (tail or graph or errors or aliasing or 4824- or 38592 or 1-int)"
    run 140 "$OUT/tests.log" "${PYTEST[@]}" --durations=5 tests/test_mlp_gpu.py -k \
      "errors or no_tail or (graph and not mma) or test_mlp_fp8[4824] or fused_y_quantization[4824]"
    smi_start
    run 280 "$OUT/bench.log" python3 benchmarks/ops_fp8.py --ops out_proj mlp --m 4824 9648 19296 38592 \
      --json "$OUT/bench_ops.json"
    smi_stop
    ;;
  s8-review)  # session 8, after review: the FP8 out_proj and the MLP on the final tree (every wgmma
              # test: the default, two-launch and tail-split forms, graphs, the capture guard),
              # then the swap-AB split-K kernels (their unit decoding moved into the engine's
              # shared helper); MLP tests in a second call (s8-review-mlp)
    run 60 "$OUT/tests.log" "${PYTEST[@]}" tests/test_out_proj_gpu.py -k "test_fp8_out_proj and 4824 and int32"
    [ "$status" = 0 ] || exit 1
    run 380 "$OUT/tests.log" "${PYTEST[@]}" --durations=5 tests/test_out_proj_gpu.py -k \
      "fp8 and not mma and not (test_fp8_out_proj and 4824 and int32)"
    run 100 "$OUT/tests.log" "${PYTEST[@]}" tests/test_gemm_gpu.py -k "small_m"
    ;;
  s8-review-mlp)  # the MLP's GPU tests on the final tree (every M, both back ends, graphs, the
                  # silu probe, the tail split)
    run 540 "$OUT/tests.log" "${PYTEST[@]}" --durations=5 tests/test_mlp_gpu.py
    ;;
  s8-final)  # session 8, last call: the silu probe over every bf16 g, then the FP8 out_proj and
             # the MLP against their torch.compile chains at every centre (clock / power logged)
    smi_start
    run 60 "$OUT/tests.log" "${PYTEST[@]}" tests/test_mlp_gpu.py -k "swiglu_silu"
    run 400 "$OUT/bench.log" python3 benchmarks/ops_fp8.py --ops out_proj mlp --m 4824 9648 19296 38592 \
      --json "$OUT/bench_ops.json"
    smi_stop
    ;;
  s8-tail)  # session 8: FC1's silu from the approximate exp2 / reciprocal (both back ends) and the
            # FP8 out_proj / FC2 tail split (out_proj.TAIL_SPLIT, opt-in): a smoke test, their
            # tests, then the out_proj and MLP benchmarks (with and without the split in one run),
            # with the SM clock, power and throttle reasons logged every 250 ms to smi.csv
    smi_start
    run 60 "$OUT/tests.log" "${PYTEST[@]}" tests/test_out_proj_gpu.py -k "tail_split and 4824 and True"
    [ "$status" = 0 ] || { smi_stop; exit 1; }
    run 240 "$OUT/tests.log" "${PYTEST[@]}" --durations=5 tests/test_out_proj_gpu.py tests/test_mlp_gpu.py -k \
      "(tail_split and not (4824 and True)) or (test_mlp_fp8 and 4824) or (test_mlp_fp8_mma_backend and 129) or (test_mlp_fp8_graph and fused)"
    run 280 "$OUT/bench.log" python3 benchmarks/ops_fp8.py --ops out_proj mlp --m 4824 9648 19296 38592 \
      --no-compile --json "$OUT/bench_ops.json"
    smi_stop
    ;;
  s8-gated)  # next session: the bf16x2 epilogue experiments of branch next/gated-bf16x2 (the
              # gated residual, FC1's SwiGLU roundings) in .abtree/ (mkdir .abtree && git archive
              # next/gated-bf16x2 | tar -x -C .abtree, then prebuild .abtree/.h3cache and carry
              # .abtree): their tests, then the out_proj / MLP / NVFP4 out_proj benchmarks of
              # both trees in one call
    [ -d .abtree ] || { echo "no .abtree"; exit 1; }
    # main first: the committed 7 / 2 spare-warp batches (smoke) and the capture guard
    run 60 "$OUT/tests.log" "${PYTEST[@]}" tests/test_out_proj_gpu.py -k \
      "(test_fp8_out_proj and 4824 and int32) or capture_needs_flags"
    [ "$status" = 0 ] || exit 1
    ( cd .abtree && export PYTHONPATH=$PWD H3CUPY_CACHE_DIR=$PWD/.h3cache &&
      run 45 "$OUT/tests.log" "${PYTEST[@]}" tests/test_out_proj_gpu.py -k "test_fp8_out_proj and 4824 and int32" &&
      [ "$status" = 0 ] ) || exit 1  # a failed or hung smoke test ends the call here
    ( cd .abtree && export PYTHONPATH=$PWD H3CUPY_CACHE_DIR=$PWD/.h3cache &&
      run 200 "$OUT/tests.log" "${PYTEST[@]}" tests/test_out_proj_gpu.py tests/test_mlp_gpu.py -k \
        "(test_fp8_out_proj and (129 or 38592) and not mma) or aliasing or (nvfp4_out_proj_hopper and 4824) or (test_mlp_fp8 and 4824)" )
    run 150 "$OUT/bench.log" python3 benchmarks/ops_fp8.py --ops out_proj mlp nvfp4_out_proj --no-compile \
      --m 4824 38592 --json "$OUT/bench_main.json"
    ( cd .abtree && export PYTHONPATH=$PWD H3CUPY_CACHE_DIR=$PWD/.h3cache &&
      run 150 "$OUT/bench.log" python3 benchmarks/ops_fp8.py --ops out_proj mlp nvfp4_out_proj --no-compile \
        --m 4824 38592 --json "$OUT/bench_gated.json" )
    ;;
  s7-final)  # session 7, last call: the FP8 out_proj on its new default (the single-launch form)
              # at every tested M and index type, aliasing, the two-launch form, the capture
              # guard, graphs; the MLP's fused and graph tests on its own switch
    run 45 "$OUT/tests.log" "${PYTEST[@]}" tests/test_out_proj_gpu.py -k "test_fp8_out_proj and 4824 and int32"
    [ "$status" = 0 ] || exit 1
    run 250 "$OUT/tests.log" "${PYTEST[@]}" --durations=5 tests/test_out_proj_gpu.py -k \
      "fp8 and not mma and not (test_fp8_out_proj and 4824 and int32)"
    run 100 "$OUT/tests.log" "${PYTEST[@]}" tests/test_mlp_gpu.py -k "fused or graph"
    ;;
  s7-fair)  # session 7: the W8A8 out_proj and MLP benchmarks again, each round of the graph
             # replays starting one function later (testing.bench_graphs)
    run 300 "$OUT/bench.log" python3 benchmarks/ops_fp8.py --ops out_proj mlp --reps 14 \
      --json "$OUT/bench_ops_fused_fair.json"
    ;;
  s7-probe)  # session 7: what slows the single-launch out_proj while its spare warps run:
              # diagnostic builds (out_proj.cu's H3_FUSED_* switches) on the 56 / 224 register
              # split that the fused kernels then had (H3_FUSED_PREGS=56; now 40 / 232)
    run 200 "$OUT/bench.log" python3 scripts/probe_fused.py --m 4824 38592 --variant \
      evict=H3_FUSED_EVICT,H3_FUSED_PREGS=56 nofence=H3_FUSED_NOFENCE,H3_FUSED_PREGS=56 \
      nospare=H3_FUSED_NOSPARE,H3_FUSED_PREGS=56 --json "$OUT/probe_fused_variants.json"
    ;;
  s7-probe2)  # session 7: the single-launch kernel's structure without spare warps (registers,
              # the per-tile poll and its proxy fence), as s7-probe
    run 200 "$OUT/bench.log" python3 scripts/probe_fused.py --m 4824 38592 --variant \
      nospare=H3_FUSED_NOSPARE,H3_FUSED_PREGS=56 nospare_r40=H3_FUSED_NOSPARE,H3_FUSED_PREGS=40 \
      nospare_nopoll=H3_FUSED_NOSPARE,H3_FUSED_NOPOLL,H3_FUSED_PREGS=56 \
      nospare_nopfence=H3_FUSED_NOSPARE,H3_FUSED_NOPFENCE,H3_FUSED_PREGS=56 \
      nopfence=H3_FUSED_NOPFENCE,H3_FUSED_PREGS=56 --json "$OUT/probe_fused_structure.json"
    ;;
  s6-nv224)  # session 6: the NVFP4 out_proj's Hopper path on n224 tiles where the wave model
              # picks them (M = 385 .. 2000, 4824, 9648 for N = 5376): tests, then timed against
              # the session's first commit (.abtree/, same NVFP4 out_proj kernels as before) in
              # the same call; the BF16 pre-attention at M = 38592 on the new epilogue
    run 200 "$OUT/tests.log" "${PYTEST[@]}" tests/test_out_proj_gpu.py -k "nvfp4 and not mma"
    run 120 "$OUT/tests.log" "${PYTEST[@]}" tests/test_pre_attention_gpu.py -k \
      "test_bf16_pre_attention and 38592 and not mma"
    run 120 "$OUT/bench.log" python3 benchmarks/ops_fp8.py --ops nvfp4_out_proj \
      --json "$OUT/bench_nvfp4_out_proj_new.json"
    [ -d .abtree ] && ( cd .abtree && export PYTHONPATH=$PWD H3CUPY_CACHE_DIR=$PWD/.h3cache &&
      run 100 "$OUT/bench.log" python3 benchmarks/ops_fp8.py --ops nvfp4_out_proj --no-compile \
        --json "$OUT/bench_nvfp4_out_proj_old.json" )
    ;;
  s6-tests)  # session 6, second call: the rest of the pre-attention tests on the new epilogue, the
             # small-M GEMM tests not yet run on a GPU (the scaled-bf16 routing guard, the shared
             # launch path), then memcheck over every GEMM path (the swap-AB ones included)
    run 330 "$OUT/tests.log" "${PYTEST[@]}" tests/test_pre_attention_gpu.py -k \
      "not mma and not errors and not 38592"
    run 90 "$OUT/tests.log" "${PYTEST[@]}" tests/test_gemm_gpu.py -k "small_m or deterministic"
    run 100 "$OUT/tests.log" compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 3 python3 scripts/memcheck_gemm.py
    ;;
  swapab)  # session 5: the swap-AB small-M bf16 path (gemm_wgmma_small_m), tested then timed
           # against cuBLAS and the engine; with it the default, gemm_wgmma's own small-M tests
    run 120 "$OUT/tests.log" "${PYTEST[@]}" tests/test_gemm_gpu.py -k \
      "small_m or test_gemm_bf16 or deterministic"
    run 120 "$OUT/bench.log" python3 benchmarks/gemm.py --m 1 16 129 --fmt bf16 \
      --backend wgmma swapab --reps 10 --json "$OUT/bench_gemm_swapab.json"
    ;;
  new)  # what has not yet passed on a GPU (2026-12-01), part 1: the W8A8 pre-attention on the
       # mma.sync back end, the NVFP4 Hopper path and the emulation, the CUDA-graph checks
    run 280 "$OUT/tests.log" "${PYTEST[@]}" tests/test_pre_attention_gpu.py \
      -k "fp8_pre_attention_mma_backend or graph or nvfp4"
    ;;
  new-mlp)  # part 2: out_proj and the MLP on the mma.sync back end, the NVFP4 out_proj Hopper
           # path, their graph checks, the MLP at the largest M, the block example
    run 250 "$OUT/tests.log" "${PYTEST[@]}" tests/test_out_proj_gpu.py -k "mma_backend or graph or nvfp4"
    run 200 "$OUT/tests.log" "${PYTEST[@]}" tests/test_mlp_gpu.py -k "mma_backend or graph or largest"
    run 120 "$OUT/tests.log" "${PYTEST[@]}" tests/test_examples.py -k h3_block
    ;;
  new-ops)  # the quantized operators (one 10-minute call, little margin: out_proj + mlp take
            # ~4 minutes with their host references)
    run 220 "$OUT/tests.log" "${PYTEST[@]}" tests/test_pre_attention_gpu.py -k "fp8 or nvfp4"
    run 200 "$OUT/tests.log" "${PYTEST[@]}" tests/test_out_proj_gpu.py
    run 150 "$OUT/tests.log" "${PYTEST[@]}" tests/test_mlp_gpu.py
    ;;
  tests)  # the foundation, engine and BF16-op GPU tests (one call; the W8A8 / W4A4 operator
         # tests are in new-ops)
    run 480 "$OUT/tests.log" "${PYTEST[@]}" tests --ignore=tests/test_out_proj_gpu.py \
      --ignore=tests/test_mlp_gpu.py -k "not fp8_pre_attention and not nvfp4_pre_attention"
    run 90 "$OUT/tests.log" compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 3 python3 scripts/memcheck_gemm.py
    ;;
  selftest)  # the self-test table (every operator that runs here)
    run 540 "$OUT/selftest.log" python3 -m h3cupy.selftest --quick
    ;;
  bench)  # the prologue, the GEMM engine and the BF16 pre-attention (one call)
    run 100 "$OUT/bench.log" python3 benchmarks/prologue.py --json "$OUT/bench_prologue.json"
    run 240 "$OUT/bench.log" python3 benchmarks/gemm.py --m 129 4824 38592 \
      --backend wgmma wgmma128x2pp wgmma192p3x2 mma_tma --json "$OUT/bench_gemm.json"
    run 200 "$OUT/bench.log" python3 benchmarks/pre_attention.py --json "$OUT/bench_pre_attention.json"
    ;;
  bench-ops)  # the W8A8 and W4A4 operators against their chains (one call)
    run 330 "$OUT/bench.log" python3 benchmarks/ops_fp8.py --json "$OUT/bench_ops_fp8.json"
    run 240 "$OUT/bench.log" python3 benchmarks/ops_fp8.py --ops nvfp4_pre_attention \
      nvfp4_out_proj --json "$OUT/bench_ops_nvfp4.json"
    ;;
  *) echo "mode: expected tests, promo, ops-check, prefetch, final, final-check, m192, s5, s5-final, s5-probe, swapab, new, new-mlp, new-ops, selftest, bench or bench-ops, got $MODE"; exit 2 ;;
esac
[ "$carried" = 1 ] || tar cf "$OUT/h3cache.tar" .h3cache 2>/dev/null
exit $status
