// The plain NVFP4 x NVFP4 GEMM (h3/gemm_nvfp4.cuh): C = bf16(acc * alpha).
#include "h3/gemm_nvfp4.cuh"

namespace h3 {

__global__ void __launch_bounds__(kMtThreads, 1) gemm_nvfp4_smxx(
    const __grid_constant__ TmaDesc desc_a, const __grid_constant__ TmaDesc desc_b,
    const __grid_constant__ TmaDesc desc_sfa, const u8* __restrict__ sfb, int sfb_c4, int M,
    int N, int k_bytes, const float* __restrict__ alpha_ptr, const float* __restrict__ ga_ptr,
    const float* __restrict__ gw_ptr, float gw_host, float alpha_host, bf16_t* __restrict__ C) {
  const float al = Nvfp4Alpha{alpha_ptr, ga_ptr, gw_ptr, gw_host, alpha_host}.get();
  // The plain mma.sync epilogue with no row / column scales: C = bf16(acc * alpha).
  const EpiMmaScaleBf16 epi{nullptr, nullptr, C, M, N, al};
  gemm_nvfp4_body<EpiMmaScaleBf16, kNvSm120Stages, 0, kNvSm120BK>(desc_a, desc_b, desc_sfa, sfb,
                                                                  sfb_c4, M, N, k_bytes, epi);
}

}  // namespace h3
