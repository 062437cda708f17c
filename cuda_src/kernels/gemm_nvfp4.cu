// The plain NVFP4 x NVFP4 GEMM (h3/gemm_nvfp4.cuh): C = bf16(acc * alpha).
#include "h3/gemm_nvfp4.cuh"

namespace h3 {

struct EpiNvfp4Plain {
  float al;  // alpha, resolved once at the kernel's start
  bf16_t* __restrict__ C;
  int M, N;

  H3_DEVICE void operator()(float (&acc)[4][8][4], int row0, int col0, int wm, int wn,
                            u8* /*scratch*/) const {
    const int lane = threadIdx.x % 32;
    const int m0 = row0 + wm, n0 = col0 + wn;
#pragma unroll
    for (int mi = 0; mi < 4; ++mi)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int row = m0 + mi * 16 + mma_c_row(lane, 2 * h);
        if (row >= M) continue;
#pragma unroll
        for (int ni = 0; ni < 8; ++ni) {
          const int col = n0 + ni * 8 + mma_c_col(lane, 2 * h);
          if (col >= N) continue;
          *reinterpret_cast<u32*>(C + static_cast<i64>(row) * N + col) = pack_bf16x2(
              f32_to_bf16(acc[mi][ni][2 * h] * al), f32_to_bf16(acc[mi][ni][2 * h + 1] * al));
        }
      }
  }
};

__global__ void __launch_bounds__(kMtThreads, 1) gemm_nvfp4_smxx(
    const __grid_constant__ TmaDesc desc_a, const __grid_constant__ TmaDesc desc_b,
    const __grid_constant__ TmaDesc desc_sfa, const u8* __restrict__ sfb, int sfb_c4, int M,
    int N, int k_bytes, const float* __restrict__ alpha_ptr, const float* __restrict__ ga_ptr,
    const float* __restrict__ gw_ptr, float gw_host, float alpha_host, bf16_t* __restrict__ C) {
  const float al = Nvfp4Alpha{alpha_ptr, ga_ptr, gw_ptr, gw_host, alpha_host}.get();
  const EpiNvfp4Plain epi{al, C, M, N};
  gemm_nvfp4_body(desc_a, desc_b, desc_sfa, sfb, sfb_c4, M, N, k_bytes, epi);
}

}  // namespace h3
