// minimax_h3_fp8_pre_attention, launch 2 of 2, on the mma.sync back end (the sm_120a path; also
// runs on sm_90a, where it is tested): the W8A8 QKV GEMM on the TMA-fed mma.sync skeleton
// (h3/gemm_mma_tma.cuh: 128 x 256 tiles, 8 warps of 64 x 64, fp32 accumulation in the MMA, so no
// promotion step) with h3/pre_attention.cuh's EpiMmaPreAttnQkv:
//   y = bf16((acc * act_scale[m]) * w_scale[n]) (MmaYRowCol); Q/K RMSNorm + RoPE with identity
//   positions; V = y; then the out mode (kOut 0 bf16, 1 e4m3, 2 nvfp4), as pre_attention_fp8.cu.
// kFmt 1: the legacy e4m3 mma.sync (m16n8k32; QMMA on sm_120a, f16 MMAs on sm_90a);
// kFmt 2: kind::mxf8f6f4 with unit scales (sm_120a only; traps elsewhere).
// kFmt 1 verified on the H200 (2026-12-01); kFmt 2 is compile- and SASS-checked only.
#include "h3/gemm_mma_tma.cuh"
#include "h3/pre_attention.cuh"

namespace h3 {

template <int kFmt, int kOut>
__global__ void __launch_bounds__(kMtThreads, 1) pre_attention_fp8_mma_smxx(
    const __grid_constant__ TmaDesc desc_a, const __grid_constant__ TmaDesc desc_b, int M,
    int k_bytes, const bf16_t* __restrict__ q_w, const bf16_t* __restrict__ k_w,
    const bf16_t* __restrict__ cs, int cs_rows, float qk_eps, const float* __restrict__ act_scale,
    const float* __restrict__ w_scale, void* oq, void* ok, void* ov, u8* sfq, u8* sfk, u8* sfv,
    const float* sp_q, const float* sp_k, const float* sp_v, float sh_q, float sh_k, float sh_v) {
  using Epi = EpiMmaPreAttnQkv<kOut, MmaYRowCol, MtSm120Scratch::kScratch>;
  const Epi epi{{q_w, k_w, cs, nullptr, 0, cs_rows, M, qk_eps},
                {act_scale, w_scale, M, 3 * kPaKindCols},
                {oq, ok, ov},
                {sfq, sfk, sfv},
                {{sp_q, sh_q}, {sp_k, sh_k}, {sp_v, sh_v}}};
  gemm_mma_tma_body<kFmt, Epi, false, MtSm120Scratch>(desc_a, desc_b, M, 3 * kPaKindCols, k_bytes,
                                                      epi);
}

}  // namespace h3
