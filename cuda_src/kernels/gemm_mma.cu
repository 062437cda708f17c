// The mma.sync back end of the GEMM engine (issue #3), first version: C = A * B^T with
// fp32 accumulation and the plain epilogue C = bf16((acc * row_scale[m]) * col_scale[n]).
//
// Operands: A [M, K] and B [N, K] row-major (B is the "col" operand, one weight row per output
// column), bf16 or e4m3; K is given in bytes (K * element size) and must be a multiple of 64;
// N a multiple of 128 (every H3 GEMM width is); M any. Scales are fp32 [M] / [N] or null (1).
// Tiles 128 x 128 x 64 bytes, 8 warps in a 2 x 4 grid (64 x 32 outputs each), a 4-stage cp.async
// ring in shared memory with a 16-byte-chunk XOR swizzle, fragments by ldmatrix. Rows of A past M
// are zero-filled by cp.async and never stored.
// NOTE: a draft of the portable path: correct on the H200 (bf16, e4m3), ~0.4x cuBLAS; the
// persistent TMA + mbarrier producer of the issue replaces the cp.async loads next.
#include "h3/copy.cuh"
#include "h3/mma_sm120.cuh"
#include "h3/mma_sync.cuh"
#include "h3/numeric.cuh"

namespace h3 {

enum GemmFmt : int { kGemmBf16 = 0, kGemmE4m3 = 1, kGemmE4m3Mx = 2 };

constexpr int kGemmBM = 128, kGemmBN = 128, kGemmBK = 64;  // BK in bytes
constexpr int kGemmStages = 4, kGemmThreads = 256;
constexpr int kGemmStageBytes = (kGemmBM + kGemmBN) * kGemmBK;  // 16 KiB
constexpr int kGemmSmemBytes = kGemmStages * kGemmStageBytes;  // 64 KiB

// Byte offset of 16-byte chunk c (0..3) of tile row r: rows are 64 bytes, and the chunk index is
// XORed with (r / 2) % 4 so that the 8 rows an ldmatrix reads land in 8 different bank groups.
H3_DEVICE int gemm_swz(int r, int c) { return r * kGemmBK + ((c ^ ((r >> 1) & 3)) << 4); }

template <int kFmt>
__global__ void __launch_bounds__(kGemmThreads) gemm_mma_smxx(
    const u8* __restrict__ A, const u8* __restrict__ B, int M, int N, int k_bytes,
    const float* __restrict__ row_scale, const float* __restrict__ col_scale,
    bf16_t* __restrict__ C) {
  extern __shared__ __align__(128) u8 smem[];
  require_dynamic_smem(kGemmSmemBytes);
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int m0 = blockIdx.y * kGemmBM, n0 = blockIdx.x * kGemmBN;
  const int wm = (warp / 4) * 64, wn = (warp % 4) * 32;
  const int k_tiles = k_bytes / kGemmBK;

  // 1. Producer: every thread copies 2 chunks of A and 2 of B per stage.
  auto load_stage = [&](int stage, int kt) {
    u8* sa = smem + stage * kGemmStageBytes;
    u8* sb = sa + kGemmBM * kGemmBK;
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const int idx = tid + i * kGemmThreads, r = idx / 4, c = idx % 4;
      const int gr = m0 + r;
      const bool ok = gr < M;
      const u8* src = A + static_cast<i64>(ok ? gr : 0) * k_bytes + kt * kGemmBK + c * 16;
      cp_async16(sa + gemm_swz(r, c), src, ok ? 16 : 0);
      const u8* srcb = B + static_cast<i64>(n0 + r) * k_bytes + kt * kGemmBK + c * 16;
      cp_async16(sb + gemm_swz(r, c), srcb);
    }
  };

  float acc[4][4][4];
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int r = 0; r < 4; ++r) acc[i][j][r] = 0.f;

#pragma unroll
  for (int s = 0; s < kGemmStages - 1; ++s) {
    if (s < k_tiles) load_stage(s, s);
    cp_async_commit();
  }

  // 2. Main loop: wait for stage kt, refill the stage freed by iteration kt - 1, run 2 k-steps
  // of 32 bytes (bf16 k16 / e4m3 k32) on it.
  for (int kt = 0; kt < k_tiles; ++kt) {
    cp_async_wait<kGemmStages - 2>();
    __syncthreads();
    const int nk = kt + kGemmStages - 1;
    if (nk < k_tiles) load_stage(nk % kGemmStages, nk);
    cp_async_commit();
    const u8* sa = smem + (kt % kGemmStages) * kGemmStageBytes;
    const u8* sb = sa + kGemmBM * kGemmBK;
#pragma unroll
    for (int ks = 0; ks < 2; ++ks) {
      u32 af[4][4], bfr[2][4];
#pragma unroll
      for (int mt = 0; mt < 4; ++mt)
        ldmatrix_x4(af[mt], sa + gemm_swz(wm + mt * 16 + (lane & 15), ks * 2 + (lane >> 4)));
#pragma unroll
      for (int np = 0; np < 2; ++np)
        ldmatrix_x4(bfr[np], sb + gemm_swz(wn + np * 16 + (lane & 7) + ((lane >> 4) << 3),
                                           ks * 2 + ((lane >> 3) & 1)));
#pragma unroll
      for (int mt = 0; mt < 4; ++mt)
#pragma unroll
        for (int nt = 0; nt < 4; ++nt) {
          const u32 b[2] = {bfr[nt / 2][(nt % 2) * 2], bfr[nt / 2][(nt % 2) * 2 + 1]};
          if constexpr (kFmt == kGemmBf16) {
            mma_bf16_16816(acc[mt][nt], af[mt], b);
          } else if constexpr (kFmt == kGemmE4m3) {
            mma_e4m3_16832(acc[mt][nt], af[mt], b);
          } else {
            mma_mxf8f6f4_e4m3_16832(acc[mt][nt], af[mt], b, kUnitUe8m0x4, kUnitUe8m0x4);
          }
        }
    }
  }
  cp_async_wait<0>();

  // 3. Epilogue: C = bf16((acc * row_scale) * col_scale), two adjacent columns per store.
#pragma unroll
  for (int mt = 0; mt < 4; ++mt)
#pragma unroll
    for (int nt = 0; nt < 4; ++nt)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int row = m0 + wm + mt * 16 + mma_c_row(lane, 2 * h);
        const int col = n0 + wn + nt * 8 + mma_c_col(lane, 2 * h);
        if (row >= M) continue;
        const float rs = row_scale ? row_scale[row] : 1.f;
        const float cs0 = col_scale ? col_scale[col] : 1.f;
        const float cs1 = col_scale ? col_scale[col + 1] : 1.f;
        const float v0 = (acc[mt][nt][2 * h] * rs) * cs0;
        const float v1 = (acc[mt][nt][2 * h + 1] * rs) * cs1;
        *reinterpret_cast<u32*>(C + static_cast<i64>(row) * N + col) =
            pack_bf16x2(f32_to_bf16(v0), f32_to_bf16(v1));
      }
}

}  // namespace h3
