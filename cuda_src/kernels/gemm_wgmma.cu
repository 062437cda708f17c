// The wgmma back end of the GEMM engine (sm_90a), first version: C = A * B^T with fp32
// accumulation and the plain epilogue C = bf16((acc * row_scale[m]) * col_scale[n]).
//
// A [M, K] and B [N, K] row-major (K-major), bf16 or e4m3, loaded by TMA (tensor maps from
// h3cupy/core/tma.py, 128-byte swizzle, boxes of 128 bytes x 128 rows; rows of A past M read as
// zero) into a kStages-deep shared-memory ring. Warpgroup 0 is the producer (one thread issues
// the TMA loads, register budget lowered with setmaxnreg); warpgroups 1 and 2 each run
// m64n128 wgmma on their 64 rows of the 128 x 128 tile. Full barriers complete on the TMA bytes;
// empty barriers take one arrival per consumer warpgroup. N must be a multiple of 128, K of 128
// bytes. One CTA per output tile (not yet persistent).
// NOTE: a first draft; compile- and SASS-checked in CI, its GPU test has not run yet.
#include "h3/mma_sm90.cuh"
#include "h3/mma_sync.cuh"
#include "h3/numeric.cuh"
#include "h3/tma.cuh"

namespace h3 {

constexpr int kWgBM = 128, kWgBN = 128, kWgBK = 128;  // BK in bytes (one 128B swizzle row)
constexpr int kWgStages = 4;
constexpr int kWgTileBytes = 128 * kWgBK;  // 16 KiB per operand per stage
constexpr int kWgSmemBytes = kWgStages * 2 * kWgTileBytes + 2 * kWgStages * 8 + 1024;

template <int kFmt>  // 0: bf16 (m64n128k16), 1: e4m3 (m64n128k32)
__global__ void __launch_bounds__(384, 1) gemm_wgmma_sm90(
    const __grid_constant__ TmaDesc desc_a, const __grid_constant__ TmaDesc desc_b, int M, int N,
    int k_bytes, const float* __restrict__ row_scale, const float* __restrict__ col_scale,
    bf16_t* __restrict__ C) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ u8 smem_raw[];
  // NOTE: 128B-swizzled TMA tiles and wgmma descriptors need 1024-byte aligned tile bases.
  u8* smem = reinterpret_cast<u8*>((reinterpret_cast<u64>(smem_raw) + 1023) & ~u64(1023));
  u8* sa = smem;
  u8* sb = smem + kWgStages * kWgTileBytes;
  u64* full = reinterpret_cast<u64*>(smem + 2 * kWgStages * kWgTileBytes);
  u64* empty = full + kWgStages;
  const int wg = threadIdx.x / 128;
  const int m0 = blockIdx.y * kWgBM, n0 = blockIdx.x * kWgBN;
  const int k_tiles = k_bytes / kWgBK;
  constexpr int kElemsPerRow = kFmt == 0 ? 64 : 128;  // elements in one 128-byte row

  if (threadIdx.x == 0) {
    for (int s = 0; s < kWgStages; ++s) {
      mbar_init(&full[s], 1);
      mbar_init(&empty[s], 2);
    }
    fence_barrier_init();
  }
  __syncthreads();

  if (wg == 0) {
    // Producer warpgroup.
    setmaxnreg_dec<40>();
    if (threadIdx.x == 0) {
      for (int kt = 0; kt < k_tiles; ++kt) {
        const int s = kt % kWgStages;
        const u32 phase = (kt / kWgStages) & 1;
        if (kt >= kWgStages) mbar_wait(&empty[s], phase ^ 1);
        mbar_arrive_expect_tx(&full[s], 2 * kWgTileBytes);
        tma_load_2d(sa + s * kWgTileBytes, &desc_a, kt * kElemsPerRow, m0, &full[s]);
        tma_load_2d(sb + s * kWgTileBytes, &desc_b, kt * kElemsPerRow, n0, &full[s]);
      }
    }
  } else {
    // Consumer warpgroups: rows 64 * (wg - 1) .. + 63 of the tile.
    setmaxnreg_inc<232>();
    float acc[64];
#pragma unroll
    for (int i = 0; i < 64; ++i) acc[i] = 0.f;
    const int row_off = 64 * (wg - 1) * kWgBK;
    for (int kt = 0; kt < k_tiles; ++kt) {
      const int s = kt % kWgStages;
      mbar_wait(&full[s], (kt / kWgStages) & 1);
      const u32 a_base = smem_addr(sa + s * kWgTileBytes + row_off);
      const u32 b_base = smem_addr(sb + s * kWgTileBytes);
      wgmma_fence();
#pragma unroll
      for (int k = 0; k < 4; ++k) {  // 4 steps of 32 bytes (k16 bf16 / k32 e4m3)
        const u64 da = wgmma_desc_k128b(a_base + 32 * k);
        const u64 db = wgmma_desc_k128b(b_base + 32 * k);
        if constexpr (kFmt == 0) {
          wgmma_bf16_m64n128k16(acc, da, db, 1);
        } else {
          wgmma_e4m3_m64n128k32(acc, da, db, 1);
        }
      }
      wgmma_commit();
      wgmma_wait<0>();
      // NOTE: one arrival per consumer warpgroup releases the stage to the producer.
      if (threadIdx.x % 128 == 0) mbar_arrive(&empty[s]);
    }

    // Epilogue: warp w of the warpgroup owns rows 16w..16w+15 of its 64.
    const int lane = threadIdx.x % 32, w = (threadIdx.x % 128) / 32;
    const int rbase = m0 + 64 * (wg - 1) + 16 * w;
#pragma unroll
    for (int j = 0; j < 16; ++j)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int row = rbase + mma_c_row(lane, 2 * h);
        const int col = n0 + 8 * j + mma_c_col(lane, 2 * h);
        if (row >= M) continue;
        const float rs = row_scale ? row_scale[row] : 1.f;
        const float cs0 = col_scale ? col_scale[col] : 1.f;
        const float cs1 = col_scale ? col_scale[col + 1] : 1.f;
        const float v0 = (acc[4 * j + 2 * h] * rs) * cs0;
        const float v1 = (acc[4 * j + 2 * h + 1] * rs) * cs1;
        *reinterpret_cast<u32*>(C + static_cast<i64>(row) * N + col) =
            pack_bf16x2(f32_to_bf16(v0), f32_to_bf16(v1));
      }
  }
#else
  __trap();
#endif
}

}  // namespace h3
