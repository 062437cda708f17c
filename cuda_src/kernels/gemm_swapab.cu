// The small-M bf16 GEMM on the sm_90a engine, operands swapped (swap-AB):
//   out[m, n] = bf16(sum_k x[m, k] * w[n, k]),  x [M, K] the activation (M <= kBN), w [N, K].
// The weight is the engine's A operand (128-row tiles, the wgmma's M side) and the activation its
// B operand (one kBN-row tile, the wgmma's N side: n16 for M <= 16, n136 for M <= 136), so the
// tensor cores do 64 x kBN work per weight block instead of 128 rows of mostly zero activation,
// and the kernel streams the weight. With kSplitK the k-tiles of each weight tile are shared by
// `splits` units (about one unit per SM), each writing an fp32 partial [splits, M, N] that
// splitk_reduce_bf16 sums in split order (bitwise deterministic).
// Verified on the H200 (2026-12-01); gemm_wgmma routes bf16 M <= 136 here (gemm.SMALL_M_SWAP_AB).
#include "h3/gemm_sm90.cuh"

namespace h3 {

// The transposed epilogue: engine row = weight row n, engine column = activation row m. Thread
// (warp w, lane l) holds d[4j + r] at n = row0 + 16w + mma_c_row(l, r), m = col0 + 8j +
// mma_c_col(l, r); lanes l / 4 = 0..7 of one (j, r) hold 8 consecutive n, i.e. 16 contiguous
// bytes of an output row.
struct EpiSwapAB {
  bf16_t* __restrict__ out;  // [M, N] (no split)
  float* __restrict__ ws;    // [splits, M, N] fp32 partials (split-K)
  int M, N;

  // store(i, e) for each fragment register d[i] inside [M, N], e = m * N + n.
  template <int kAcc, class Store>
  H3_DEVICE void each(int row0, int col0, const Store& store) const {
#pragma unroll
    for (int j = 0; j < kAcc / 4; ++j)
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        const int lane = threadIdx.x % 32, w = (threadIdx.x % 128) / 32;
        const int n = row0 + 16 * w + mma_c_row(lane, r);
        const int m = col0 + 8 * j + mma_c_col(lane, r);
        if (m < M && n < N) store(4 * j + r, static_cast<i64>(m) * N + n);
      }
  }

  template <int kAcc>
  H3_DEVICE void operator()(float (&d)[kAcc], int row0, int col0, u8*, int) const {
    each<kAcc>(row0, col0, [&](int i, i64 e) { out[e] = f32_to_bf16(d[i]); });
  }

  template <int kAcc>
  H3_DEVICE void operator()(float (&d)[kAcc], int row0, int col0, u8*, int, int split) const {
    float* part = ws + static_cast<i64>(split) * M * N;
    each<kAcc>(row0, col0, [&](int i, i64 e) { part[e] = d[i]; });
  }
};

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define H3_SWAPAB_BODY                                                                         \
  gemm_sm90_body<0, kBN, 0, 1, EpiSwapAB, false, NoProducerHooks, 2, kSplitK>(                 \
      desc_w, desc_x, N, M, k_bytes, epi, NoProducerHooks{}, splits)
#else
#define H3_SWAPAB_BODY __trap()
#endif

// desc_w: the weight [N, K] in 128-row boxes; desc_x: the activation [M, K] in kBN-row boxes.
template <int kBN, bool kSplitK>
__global__ void __launch_bounds__(384, 1) gemm_swapab_sm90(
    const __grid_constant__ TmaDesc desc_w, const __grid_constant__ TmaDesc desc_x, int N, int M,
    int k_bytes, int splits, bf16_t* __restrict__ out, float* __restrict__ ws) {
  const EpiSwapAB epi{out, ws, M, N};
  H3_SWAPAB_BODY;
}

#undef H3_SWAPAB_BODY

// out[e] = bf16(sum_{s < splits} ws[s * count + e]), summed in split order.
__global__ void __launch_bounds__(256) splitk_reduce_bf16(const float* __restrict__ ws,
                                                          int splits, i64 count,
                                                          bf16_t* __restrict__ out) {
  for (i64 e = blockIdx.x * static_cast<i64>(blockDim.x) + threadIdx.x; e < count;
       e += static_cast<i64>(gridDim.x) * blockDim.x) {
    float acc = ws[e];
    for (int s = 1; s < splits; ++s) acc += ws[s * count + e];
    out[e] = f32_to_bf16(acc);
  }
}

}  // namespace h3
