// minimax_h3_nvfp4_pre_attention, launch 2 of 2 (SPEC.md section 4, W4A4): the NVFP4 QKV GEMM
// (h3/gemm_nvfp4.cuh: the block-scaled kind::mxf4nvf4 MMA on sm_120a, exact bf16 emulation on
// sm_90a) with the pre-attention epilogue on the mma.sync fragment layout (h3/pre_attention.cuh's
// EpiMmaPreAttnQkv): y = bf16(acc * alpha), alpha = given or 1 / (act_global_scale * weight global
// scale) on the device; Q/K RMSNorm + RoPE (identity positions); then the out mode.
// Verified on the H200 (sm_90a emulation, every out mode, 2026-12-01); sm_120a compile- and
// SASS-checked only.
#include "h3/gemm_nvfp4.cuh"
#include "h3/pre_attention.cuh"
#include "h3/pre_attention_wg.cuh"
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
  using Epi = EpiMmaPreAttnQkv<kOut, MmaYAlpha, kNvSm120PaScratch>;
  const Epi epi{{q_w, k_w, cs, nullptr, 0, cs_rows, M, qk_eps},
                {alpha},
                {oq, ok, ov},
                {sfq, sfk, sfv},
                {{sp_q, sh_q}, {sp_k, sh_k}, {sp_v, sh_v}}};
  gemm_nvfp4_body<Epi, kNvSm120Stages, kNvSm120PaScratch, kNvSm120BK>(
      desc_a, desc_b, desc_sfa, sfb, sfb_c4, M, 3 * kPaKindCols, k_bytes, epi);
}

// The Hopper path (sm_90a): the same op as a bf16 GEMM on the sm_90a engine over the dequantized
// operands a' = e2m1 * sf_a and w' = e2m1 * sf_w (exact in bf16, quantize.cu's
// nvfp4_dequant_bf16_smxx), so the fp32 sums hold the block-scaled products, then y = bf16(acc *
// alpha) (WgYAlpha) and h3/pre_attention_wg.cuh's epilogue; 128 x 256 tiles (two heads per
// warpgroup, as the BF16 op) in clusters of two, 128 x 128 for small M.
// Verified on the H200 (every out mode, graph capture; 2026-12-01): the sm_90a default.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define H3_CLUSTER_X2 __cluster_dims__(2, 1, 1)
#else
#define H3_CLUSTER_X2
#endif

#define H3_PANV_PARAMS                                                                        \
  const __grid_constant__ TmaDesc desc_a, const __grid_constant__ TmaDesc desc_b,             \
      const __grid_constant__ TmaDesc desc_q, const __grid_constant__ TmaDesc desc_k,         \
      const __grid_constant__ TmaDesc desc_v, int M, int k_bytes,                             \
      const bf16_t *__restrict__ q_w, const bf16_t *__restrict__ k_w,                         \
      const bf16_t *__restrict__ cs, int cs_rows, float qk_eps,                               \
      const float *__restrict__ alpha_ptr, const float *__restrict__ ga_ptr,                  \
      const float *__restrict__ gw_ptr, float gw_host, float alpha_host, u8 *sf_q, u8 *sf_k,  \
      u8 *sf_v, const float *sp_q, const float *sp_k, const float *sp_v, float sh_q,          \
      float sh_k, float sh_v

#define H3_PANV_EPI                                                                          \
  const float alpha = Nvfp4Alpha{alpha_ptr, ga_ptr, gw_ptr, gw_host, alpha_host}.get();     \
  const EpiPreAttnQkv<kOut, WgYAlpha> epi {                                                  \
    {q_w, k_w, cs, nullptr, 0, cs_rows, M, 1, qk_eps}, {alpha}, {&desc_q, &desc_k, &desc_v}, \
        {sf_q, sf_k, sf_v}, {{sp_q, sh_q}, {sp_k, sh_k}, {sp_v, sh_v}}                       \
  }

template <int kOut>
__global__ void H3_CLUSTER_X2 __launch_bounds__(384, 1) pre_attention_nvfp4_wg_x2_sm90(H3_PANV_PARAMS) {
  H3_PANV_EPI;
  const EpiTwoHeads<EpiPreAttnQkv<kOut, WgYAlpha>> epi2{epi};
  gemm_sm90_body<0, 256, 0, 2>(desc_a, desc_b, M, 3 * kPaKindCols, k_bytes, epi2);
}

template <int kOut>
__global__ void __launch_bounds__(384, 1) pre_attention_nvfp4_wg_sm90(H3_PANV_PARAMS) {
  H3_PANV_EPI;
  gemm_sm90_body<0, 128, 0, 1>(desc_a, desc_b, M, 3 * kPaKindCols, k_bytes, epi);
}

#undef H3_PANV_EPI
#undef H3_PANV_PARAMS

}  // namespace h3
