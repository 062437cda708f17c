// The plain GEMM on the TMA-fed mma.sync back end (h3/gemm_mma_tma.cuh), sm_90a and sm_120a:
//   C = bf16((A * B^T) * row_scale[m] * col_scale[n]), fp32 accumulation, scales optional.
// kFmt: 0 bf16, 1 e4m3, 2 e4m3 through sm_120a's kind::mxf8f6f4 with unit scales.
// kWS: a producer warpgroup issues the loads (384 threads; h3/gemm_mma_tma.cuh), else thread 0
// of the eight consumer warps does (256 threads). kPlan: the shared-memory plan (h3/gemm_mma_tma.cuh):
// 0 MtBig (128-byte k-tiles, 4 stages, 225 KiB, Hopper only); 1 MtSm120 (64-byte k-tiles, 4
// stages, sm_120's 99 KiB; instantiated in the thread-0 form: sm_120a has no setmaxnreg, so a
// producer warpgroup caps every thread at 168 registers, and the block-scaled form spills there).
#include "h3/gemm_mma_tma.cuh"

namespace h3 {

template <int kFmt, bool kWS = false, int kPlan = 0>
__global__ void __launch_bounds__(kWS ? kMtWsThreads : kMtThreads, 1) gemm_mma_tma_smxx(
    const __grid_constant__ TmaDesc desc_a, const __grid_constant__ TmaDesc desc_b, int M, int N,
    int k_bytes, const float* __restrict__ row_scale, const float* __restrict__ col_scale,
    bf16_t* __restrict__ C) {
  const EpiMmaScaleBf16 epi{row_scale, col_scale, C, M, N};
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ != 900
  // MtBig's 225 KiB exist on Hopper only (an sm_120 block gets 99 KiB): off sm_90 the plan-0
  // builds are a trap, so nothing spills or takes compile time for a kernel that cannot launch
  // (NVRTC 13's ptxas spilled the block-scaled producer-warpgroup form on sm_120a).
  if constexpr (kPlan == 0) {
    __trap();
    return;
  }
#endif
  gemm_mma_tma_body<kFmt, EpiMmaScaleBf16, kWS, typename MtPlan<kPlan>::Cfg>(desc_a, desc_b, M, N,
                                                                             k_bytes, epi);
}

}  // namespace h3
