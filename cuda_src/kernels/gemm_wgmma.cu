// The plain GEMM on the sm_90a engine (h3/gemm_sm90.cuh):
//   C = bf16((A * B^T) * row_scale[m] * col_scale[n]), fp32 accumulation, scales optional.
// Instantiated as gemm_wgmma[_x2]_sm90<fmt, tile N, promote, ping-pong, consumer warpgroups>:
// fmt 0 bf16, 1 e4m3; _x2 runs clusters of two CTAs that multicast B; ping-pong gives each
// consumer warpgroup whole tiles, alternately, so one warpgroup's epilogue overlaps the other's
// MMAs. The cooperative
// variants (kTailOk) split the last partial round's tiles over k (TailSplit; tail_splits = 1:
// off; the others ignore the three tail arguments).
#include "h3/gemm_sm90.cuh"

namespace h3 {

// NOTE: clusters exist from sm_90 on; the module also compiles (to trapping stubs) elsewhere.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define H3_CLUSTER_X2 __cluster_dims__(2, 1, 1)
#else
#define H3_CLUSTER_X2
#endif

// The tail split (TailSplit) in the cooperative variants, except promotion mode 4 and promoted
// 224-column tiles, which spill with it (mirrored by gemm.wgmma_has_tail on the host; test_sass
// checks they agree). The unpromoted 224- and 256-column tiles fit it since the chunked partial
// sums (session 9).
template <int kBN, int kPromote, bool kPingPong>
constexpr bool kTailOk = !kPingPong && kPromote != 4 && (kPromote == 0 || kBN <= 192);

// The scales through shared memory and a one-pass store (EpiScaleBf16's kVecCols) in the FP8
// 192-column tiles, where the ring keeps its 4 stages (gemm.wgmma_vec_cols mirrors it).
template <int kFmt, int kBN, bool kPingPong>
constexpr int kVecCols = H3_EPI_VEC(kFmt == 1 && kBN == 192 && !kPingPong ? kBN : 0);

// kCluster = 1: plain launch; kCluster = 2: clusters of two CTAs sharing (multicasting) B.
// One kernel per cluster size (the cluster shape is a compile-time attribute of the kernel).
// kWG consumer warpgroups, 64 rows each: 2, or 3 for the benchmark-only 192 x 192 bf16 tiles
// (unpromoted; one m64n192 wgmma per warpgroup and k-step; cuBLAS's own bf16 tile at the H3
// shapes: its torch.mm kernel runs 192 x 192, 64-deep k-tiles, 4 stages, clusters of two). Those
// store through one 8 KiB staging box per warpgroup, which keeps their ring at four 48 KiB
// stages, and have no tail split (with it ptxas spilled 12 words at the 512-thread launch's 128
// registers).
#define H3_GEMM_WGMMA_KERNEL(NAME, CLUSTER_ATTR, CLUSTER)                                      \
  template <int kFmt, int kBN, int kPromote, bool kPingPong, int kWG>                          \
  __global__ void CLUSTER_ATTR __launch_bounds__(128 * (kWG + 1), 1)                           \
      NAME(const __grid_constant__ TmaDesc desc_a, const __grid_constant__ TmaDesc desc_b,     \
           const __grid_constant__ TmaDesc desc_c, int M, int N, int k_bytes,                  \
           const float* __restrict__ row_scale, const float* __restrict__ col_scale,           \
           float* tail_part, u32* tail_count, int tail_splits) {                               \
    static_assert(kWG == 2 || (kFmt == 0 && kPromote == 0 && !kPingPong),                      \
                  "three consumer warpgroups: unpromoted bf16, cooperative");                  \
    using Epi = EpiScaleBf16<kVecCols<kFmt, kBN, kPingPong>, kWG == 3 ? 1 : kStagingBoxes>;    \
    const Epi epi{row_scale, col_scale, &desc_c, M, N};                                        \
    gemm_sm90_body<kFmt, kBN, kPromote, CLUSTER, Epi, kPingPong, NoProducerHooks, kWG, false,  \
                   kWG == 2 && kTailOk<kBN, kPromote, kPingPong>>(                             \
        desc_a, desc_b, M, N, k_bytes, epi, {}, 1, {tail_part, tail_count, tail_splits});     \
  }

H3_GEMM_WGMMA_KERNEL(gemm_wgmma_sm90, , 1)
H3_GEMM_WGMMA_KERNEL(gemm_wgmma_x2_sm90, H3_CLUSTER_X2, 2)

#undef H3_GEMM_WGMMA_KERNEL

}  // namespace h3
