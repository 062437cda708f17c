// minimax_h3_nvfp4_pre_attention, launch 2 of 2 (SPEC.md section 4, W4A4): the NVFP4 QKV GEMM
// (h3/gemm_nvfp4.cuh: the block-scaled kind::mxf4nvf4 MMA on sm_120a, exact bf16 emulation on
// sm_90a) with the pre-attention epilogue on the mma.sync fragment layout (h3/pre_attention.cuh's
// EpiMmaPreAttnQkv): y = bf16(acc * alpha), alpha = given or 1 / (act_global_scale * weight global
// scale) on the device; Q/K RMSNorm + RoPE (identity positions); then the out mode.
// Verified on the H200 (sm_90a emulation, every out mode, 2026-12-01); sm_120a compile- and
// SASS-checked only.
#include "h3/gemm_nvfp4.cuh"
#include "h3/pre_attention.cuh"
#include "h3/quant.cuh"

namespace h3 {

template <int kOut>
__global__ void __launch_bounds__(kMtThreads, 1) pre_attention_nvfp4_smxx(
    const __grid_constant__ TmaDesc desc_a, const __grid_constant__ TmaDesc desc_b,
    const __grid_constant__ TmaDesc desc_sfa, const u8* __restrict__ sfb, int sfb_c4, int M,
    int k_bytes, const bf16_t* __restrict__ q_w, const bf16_t* __restrict__ k_w,
    const bf16_t* __restrict__ cs, int cs_rows, float qk_eps, const float* __restrict__ alpha_ptr,
    const float* __restrict__ ga_ptr, const float* __restrict__ gw_ptr, float gw_host,
    float alpha_host, void* oq, void* ok, void* ov, u8* sfq, u8* sfk, u8* sfv, const float* sp_q,
    const float* sp_k, const float* sp_v, float sh_q, float sh_k, float sh_v) {
  const float alpha = Nvfp4Alpha{alpha_ptr, ga_ptr, gw_ptr, gw_host, alpha_host}.get();
  const EpiMmaPreAttnQkv<kOut, MmaYAlpha> epi{{q_w, k_w, cs, nullptr, 0, cs_rows, M, qk_eps},
                                              {alpha},
                                   {oq, ok, ov},
                                   {sfq, sfk, sfv},
                                   {{sp_q, sh_q}, {sp_k, sh_k}, {sp_v, sh_v}}};
  gemm_nvfp4_body<EpiMmaPreAttnQkv<kOut, MmaYAlpha>, 3, kMtScratchBytes>(
      desc_a, desc_b, desc_sfa, sfb, sfb_c4, M, 3 * kPaKindCols, k_bytes, epi);
}

}  // namespace h3
