#!/usr/bin/env bash
# Nsight Compute rounds on the GPU machine, from the tree (ncu --clock-control none: the H200 runs
# at its own clocks). Speed of light, compute / memory workload, warp stalls, launch stats.
#   OUT=out bash scripts/profile_ncu.sh small-m        the bf16 QKV GEMM at M = 1 (the swap-AB
#       weight stream) and cuBLAS's kernels for it, then the FP8 pre-attention kernel at M = 4824
#   OUT=out bash scripts/profile_ncu.sh pre-attention  the BF16 pre-attention kernel at M = 4824
#       against the engine's plain bf16 GEMM and cuBLAS's kernel for the same QKV product
#   OUT=out bash scripts/profile_ncu.sh mlp            the MLP's FC1 kernel (SwiGLU epilogue) at
#       M = 4824 against the engine's plain FP8 GEMM of the same shape
#   OUT=out bash scripts/profile_ncu.sh out-proj       the FP8 out_proj's GEMM kernel (gated
#       residual) at M = 4824 against the engine's plain FP8 GEMM of the O shape
#   OUT=out bash scripts/profile_ncu.sh traffic        bytes moved (DRAM, L2, shared memory),
#       instructions and cycles of the engine's default GEMM against cuBLAS's, FP8 QKV / FC1 at
#       M = 38592 and 4824 and bf16 QKV at 38592 (where the engine draws more energy per call)
#   OUT=out bash scripts/profile_ncu.sh order          DRAM / L2 bytes of the engine's tile orders
#   OUT=out bash scripts/profile_ncu.sh order-new      the same for the default order, five shapes
#   OUT=out bash scripts/profile_ncu.sh mma-tma        the mma.sync back end's full sections at
#       M = 38592 (bf16 QKV) beside the wgmma engine's
#   OUT=out bash scripts/profile_ncu.sh out-proj-src   the FP8 out_proj's stall samples per SASS
#       instruction against the plain FP8 GEMM's, M = 9648, as CSV
#   OUT=out bash scripts/profile_ncu.sh src-ops        the same per-instruction samples of the
#       operators' default kernels (out_proj, FC1, both pre-attentions), M = 9648
#   OUT=out bash scripts/profile_ncu.sh out-proj-mem   the single-launch FP8 out_proj kernel
#       (spare warps quantizing attn_out) against the same GEMM on quantized input (the
#       two-launch form's), M = 4824: memory workload (L1 / L2 / DRAM throughput, bank conflicts)
#   OUT=out bash scripts/profile_ncu.sh mma-src        the mma.sync back end's stall samples per
#       SASS instruction (SourceCounters) at M = 9648, bf16 QKV, as CSV
set -u -o pipefail
OUT=${OUT:-out}
MODE=${1:-pre-attention}
mkdir -p "$OUT"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 H3CUPY_CACHE_DIR=$PWD/.h3cache
SECTIONS=(--section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis
  --section WarpStateStats --section InstructionStats --section Occupancy --section LaunchStats)
NCU=(ncu --clock-control none --kernel-name-base mangled)

# h3 KERNEL_REGEX SKIP CMD...: one launch of an h3cupy kernel inside a benchmark run
h3() {
  local regex=$1 skip=$2
  shift 2
  timeout 150 "${NCU[@]}" --kernel-name "regex:$regex" --launch-skip "$skip" --launch-count 1 \
    "${SECTIONS[@]}" "$@"
}

# cublas_qkv M COUNT: the kernels of the fourth torch.mm call for the bf16 QKV product at M rows
cublas_qkv() {
  timeout 90 "${NCU[@]}" --profile-from-start off --launch-skip 3 --launch-count "$2" \
    "${SECTIONS[@]}" python3 -c "
import torch
a = torch.randn($1, 5376, device='cuda').bfloat16()
b = (torch.randn(21504, 5376, device='cuda') * 0.01).bfloat16()
torch.cuda.synchronize()
torch.cuda.profiler.start()
for _ in range(6):
    torch.mm(a, b.t())
torch.cuda.synchronize()
torch.cuda.profiler.stop()"
}

# op_vs_plain KERNEL_REGEX OP SHAPE TITLE: an FP8 operator's fused GEMM kernel at M = 4824
# (benchmarks/ops_fp8.py --ops OP) and the engine's plain FP8 GEMM of the same shape
op_vs_plain() {
  {
    echo "== h3cupy $4, M = 4824"
    h3 "$1" 2 python3 benchmarks/ops_fp8.py --ops "$2" --m 4824 --no-compile --reps 1
    echo "== h3cupy FP8 engine GEMM, $3 shape, M = 4824 (the plain epilogue)"
    h3 gemm_wgmma 2 python3 benchmarks/gemm.py --m 4824 --fmt e4m3 --shapes "$3" --backend wgmma \
      --reps 2
  } 2>&1
}

case "$MODE" in
  small-m)
    {
      echo "== h3cupy bf16 QKV at M = 1: the swap-AB GEMM kernel (gemm_wgmma's route there)"
      h3 gemm_swapab 3 python3 benchmarks/gemm.py --m 1 --fmt bf16 --shapes qkv --backend wgmma --reps 2
      echo "== cuBLAS (torch.mm), QKV, M = 1: every kernel of the fourth call"
      cublas_qkv 1 2
      echo "== h3cupy FP8 pre-attention kernel, M = 4824"
      h3 pre_attention_fp8_m192 2 python3 benchmarks/ops_fp8.py --ops pre_attention --m 4824 \
        --no-compile --reps 1
    } 2>&1 | tee "$OUT/ncu_small_m.txt"
    ;;
  pre-attention)
    {
      echo "== h3cupy BF16 pre-attention kernel, M = 4824"
      h3 pre_attention_bf16_x2 2 python3 benchmarks/pre_attention.py --p 8 --no-compile --reps 1
      echo "== h3cupy bf16 engine GEMM, QKV, M = 4824"
      h3 gemm_wgmma 2 python3 benchmarks/gemm.py --m 4824 --fmt bf16 --shapes qkv --backend wgmma \
        --reps 2
      echo "== cuBLAS (torch.mm), QKV, M = 4824: the fourth call's kernel"
      cublas_qkv 4824 1
    } 2>&1 | tee "$OUT/ncu_pre_attention.txt"
    ;;
  mlp)
    op_vs_plain mlp_fc1_fp8_x2 mlp fc1 "MLP FC1 kernel (FP8 GEMM + SwiGLU epilogue)" | tee "$OUT/ncu_mlp.txt"
    ;;
  out-proj)
    op_vs_plain out_proj_fp8_x2 out_proj o "FP8 out_proj GEMM kernel (gated-residual epilogue)" |
      tee "$OUT/ncu_out_proj.txt"
    ;;
  traffic)
    METRICS=dram__bytes_read.sum,dram__bytes_write.sum,lts__t_bytes.sum,lts__t_sectors_srcunit_tex_op_read.sum
    METRICS=$METRICS,sm__inst_executed.sum,sm__cycles_elapsed.avg,gpu__time_duration.sum
    METRICS=$METRICS,l1tex__data_bank_reads.avg.pct_of_peak_sustained_elapsed,l1tex__data_bank_writes.sum
    METRICS=$METRICS,l1tex__data_bank_reads.sum,sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_elapsed
    timeout 200 ncu --clock-control none --profile-from-start off --metrics "$METRICS" \
      python3 scripts/ncu_traffic.py "e4m3 qkv 38592 base" "e4m3 fc1 38592 base" \
      "e4m3 qkv 4824 base" "e4m3 o 38592 base" "bf16 qkv 38592 base" 2>&1 | tee "$OUT/ncu_traffic.txt"
    ;;
  order)  # DRAM / L2 bytes of the FP8 engine's tile orders: single CTAs grouped by 8 (default),
          # 16, 32, 64 M-tiles, and clusters of two grouped by 8 / 16 pairs (QKV, FC1 at 38592)
    METRICS=dram__bytes_read.sum,dram__bytes_write.sum,lts__t_bytes.sum,gpu__time_duration.sum
    METRICS=$METRICS,sm__cycles_elapsed.avg
    timeout 200 ncu --clock-control none --profile-from-start off --metrics "$METRICS" \
      python3 scripts/ncu_traffic.py "e4m3 qkv 38592 n=2" "e4m3 qkv 38592 n=2 group=16" \
      "e4m3 qkv 38592 n=2 group=32" "e4m3 qkv 38592 n=2 group=64" "e4m3 qkv 38592 n=2 cluster=2" \
      "e4m3 qkv 38592 n=2 cluster=2 group=16" "e4m3 fc1 38592 n=2 cluster=2" \
      "e4m3 fc1 38592 n=2 group=32" "bf16 qkv 38592 n=2 group=16" 2>&1 | tee "$OUT/ncu_order.txt"
    ;;
  order-new)  # the same bytes for the K-dependent tile order (session 12) at the five shapes
    METRICS=dram__bytes_read.sum,dram__bytes_write.sum,lts__t_bytes.sum,gpu__time_duration.sum
    timeout 120 ncu --clock-control none --profile-from-start off --metrics "$METRICS" \
      python3 scripts/ncu_traffic.py "e4m3 qkv 38592 n=1" "e4m3 fc1 38592 n=1" "e4m3 o 38592 n=1" \
      "e4m3 fc2 38592 n=1" "bf16 qkv 38592 n=1" "bf16 fc1 38592 n=1" 2>&1 | tee "$OUT/ncu_order_new.txt"
    ;;
  mma-tma)  # the mma.sync back end at M = 38592 (bf16 QKV; issue #3 asks 480 TFLOP/s, it runs
            # ~425 at 1.8 GHz): where its issue slots and tensor pipe go, against the wgmma engine
    timeout 200 "${NCU[@]}" --profile-from-start off "${SECTIONS[@]}" --section SchedulerStats \
      python3 scripts/ncu_traffic.py "bf16 qkv 38592 n=1 backend=mma_tma" "bf16 qkv 38592 n=1" \
      2>&1 | tee "$OUT/ncu_mma_tma.txt"
    ;;
  out-proj-src)  # where the FP8 out_proj's warps stall, per SASS instruction (sampled), against
                 # the plain FP8 engine GEMM of the O shape, M = 9648: the gated residual's
                 # epilogue (session 10's probe: 3.8 us per tile against 1.3) read line by line
    timeout 150 "${NCU[@]}" --kernel-name regex:out_proj_fp8_fused_n192 --launch-skip 2 \
      --launch-count 1 --section SourceCounters --section WarpStateStats -f -o "$OUT/ncu_op_src" \
      python3 benchmarks/ops_fp8.py --ops out_proj --m 9648 --no-compile --reps 1 2>&1 |
      tee "$OUT/ncu_op_src.txt"
    timeout 150 "${NCU[@]}" --kernel-name regex:gemm_wgmma --launch-skip 2 --launch-count 1 \
      --section SourceCounters --section WarpStateStats -f -o "$OUT/ncu_plain_src" \
      python3 benchmarks/gemm.py --m 9648 --fmt e4m3 --shapes o --backend wgmma --reps 2 2>&1 |
      tee "$OUT/ncu_plain_src.txt"
    for r in op plain; do
      timeout 120 ncu --import "$OUT/ncu_${r}_src.ncu-rep" --page source --csv --print-source sass \
        > "$OUT/ncu_${r}_src_sass.csv" 2>&1
    done
    ;;
  src-ops)  # stall samples per SASS instruction (sampled, as CSV) of the operators' default
             # kernels at M = 9648: the FP8 out_proj (gated residual), the MLP's FC1 (SwiGLU),
             # the FP8 and the BF16 pre-attention (RMSNorm + RoPE epilogues)
    src_one() {  # src_one NAME REGEX CMD...
      local name=$1 regex=$2
      shift 2
      timeout 150 "${NCU[@]}" --kernel-name "regex:$regex" --launch-skip 2 --launch-count 1 \
        --section SourceCounters --section WarpStateStats -f -o "$OUT/ncu_${name}_src" "$@" 2>&1 |
        tee "$OUT/ncu_${name}_src.txt"
      timeout 120 ncu --import "$OUT/ncu_${name}_src.ncu-rep" --page source --csv --print-source sass \
        > "$OUT/ncu_${name}_src_sass.csv" 2>&1
      rm -f "$OUT/ncu_${name}_src.ncu-rep"
    }
    src_one op out_proj_fp8_fused_n192 python3 benchmarks/ops_fp8.py --ops out_proj --m 9648 --no-compile --reps 1
    src_one fc1 mlp_fc1_fp8_n192 python3 benchmarks/ops_fp8.py --ops mlp --m 9648 --no-compile --reps 1
    src_one prefp8 pre_attention_fp8 python3 benchmarks/ops_fp8.py --ops pre_attention --m 9648 --no-compile --reps 1
    src_one prebf16 pre_attention_bf16_x2 python3 benchmarks/pre_attention.py --p 4 --no-compile --reps 1
    ;;
  out-proj-mem)
    {
      echo "== h3cupy FP8 out_proj, single launch (out_proj_fp8_fused_n192), M = 4824"
      timeout 150 "${NCU[@]}" --kernel-name regex:out_proj_fp8_fused_n192 --launch-skip 2 \
        --launch-count 1 "${SECTIONS[@]}" --section MemoryWorkloadAnalysis_Tables \
        python3 benchmarks/ops_fp8.py --ops out_proj --m 4824 --no-compile --reps 1
      echo "== h3cupy FP8 out_proj, the same GEMM on quantized input (out_proj_fp8_n192), M = 4824"
      timeout 150 "${NCU[@]}" --kernel-name regex:out_proj_fp8_n192 --launch-skip 2 \
        --launch-count 1 "${SECTIONS[@]}" --section MemoryWorkloadAnalysis_Tables \
        python3 benchmarks/ops_fp8.py --ops out_proj --m 4824 --no-compile --reps 1
    } 2>&1 | tee "$OUT/ncu_out_proj_mem.txt"
    ;;
  mma-src)  # where the mma.sync back end's warps stall, per SASS instruction (sampled): the
            # k-tile top (full-barrier wait, first ldmatrix) against the steady HMMA stream
    timeout 200 "${NCU[@]}" --profile-from-start off --section SourceCounters \
      --section WarpStateStats -f -o "$OUT/ncu_mma_src" \
      python3 scripts/ncu_traffic.py "bf16 qkv 9648 n=1 backend=mma_tma" 2>&1 | tee "$OUT/ncu_mma_src.txt"
    timeout 120 ncu --import "$OUT/ncu_mma_src.ncu-rep" --page source --csv --print-source sass \
      > "$OUT/ncu_mma_src_sass.csv" 2>&1
    ;;
  *)
    echo "unknown mode: $MODE (small-m, pre-attention, mlp, out-proj, traffic, order, order-new, mma-tma, mma-src, out-proj-src, out-proj-mem, src-ops)" >&2
    exit 2
    ;;
esac
