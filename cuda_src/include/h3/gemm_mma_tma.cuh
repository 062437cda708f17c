// The mma.sync back end on the engine's TMA skeleton (sm_90a, sm_120a): C = A * B^T with fp32
// accumulation, the epilogue a functor (the plain one: C = bf16((acc * row_scale[m]) *
// col_scale[n]), kernels/gemm_mma_tma.cu).
//
// * A [M, K], B [N, K] row-major, bf16 or e4m3, loaded by TMA (boxes of Cfg::kBK bytes x 128 rows
//   for A and x 256 rows for B, swizzled over the same span; zeros past M and N) into a ring of
//   Cfg::kStages stages with full / empty mbarriers, as gemm_sm90.cuh.
// * The shared-memory plan (MtCfg) is a template parameter: MtBig (128-byte k-tiles, 4 stages,
//   32 KiB of epilogue scratch: 225 KiB, Hopper only) and the plans that fit the 99 KiB
//   (101376-byte) opt-in limit of sm_120 boards (RTX 5090 / PRO 6000): MtSm120 (64-byte k-tiles,
//   4 stages, no scratch: 99392 bytes) and MtSm120Scratch (64-byte k-tiles, 3 stages, 16 KiB of
//   scratch: 90160 bytes). The operators' mma.sync kernels use the sm_120 plans on every target,
//   so the layout that sm_120a runs is the one tested on the H200.
// * 256 threads, 8 warps in a 2 x 4 grid, each owning a 64 x 64 block of the 128 x 256 tile: per
//   32-byte k-step, four ldmatrix.x4 for A (four m16 row blocks), four for B (eight n8 column
//   blocks), 32 mma.sync. The swizzled smem address of 16-byte chunk c of row r is
//   r * 128 + ((c ^ (r % 8)) * 16) for 128-byte k-tiles (TMA's 128B swizzle) and
//   r * 64 + ((c ^ ((r / 2) % 4)) * 16) for 64-byte ones (the 64B swizzle).
// * Thread 0 is also the producer: at k-iteration `it` it issues the loads of iteration
//   it + kStages - 1 (crossing into the CTA's next tile), after that stage's empty barrier says
//   every warp has released it. A dedicated producer warp would make 9 warps, and the register
//   file is split over 4 schedulers: 3 warps on one of them cap every thread at 168 registers,
//   which spills the 128-register accumulator (seen in ptxas's report); 8 warps allow 255.
// * Each warp releases a stage (one arrival, lane 0) once the MMAs that consumed its ldmatrix
//   results have been issued: 8 arrivals free a stage.
// * Persistent: CTA b takes tiles b, b + gridDim.x, ... in the engine's grouped order.
// * kWS (the warp-specialized form, 384 threads): warpgroup 0 is the producer (setmaxnreg down
//   to 40 registers; thread 0 issues every load as soon as its stage is free, up to the whole
//   ring ahead), warpgroups 1 and 2 the eight consumer warps (232 registers), which then never
//   wait on an empty barrier. Only for epilogues that do not __syncthreads() (the plain one).
// kFmt: 0 bf16 (m16n8k16), 1 e4m3 (m16n8k32; on sm_90 ptxas runs it as f16 MMAs, see
// benchmarks/NOTES.md), 2 e4m3 through sm_120a's block-scaled kind::mxf8f6f4 with unit scales.
// kFmt 0 / 1 verified on the H200 (2026-12-01); kFmt 2 is compile- and SASS-checked only.
#pragma once
#include "h3/gemm_sm90.cuh"
#include "h3/mma_sm120.cuh"
#include "h3/mma_sync.cuh"
#include "h3/numeric.cuh"

namespace h3 {

constexpr int kMtBM = 128, kMtBN = 256;
constexpr int kMtThreads = 256;
constexpr int kMtWsThreads = 384;  // the warp-specialized form (kWS)
constexpr int kMtScratchBytes = 32 * 1024;  // MtBig's epilogue scratch (cross-warp exchanges)
// The opt-in shared-memory limit per block of sm_120 (and sm_86 / sm_89) parts.
constexpr int kSm120SmemLimit = 101376;

// A shared-memory plan: k-tile bytes (128 or 64, also the TMA box width and swizzle span),
// ring stages, epilogue scratch bytes. Mirrored in h3cupy/ops/gemm.py (MT_BIG, MT_SM120,
// MT_SM120_SCRATCH; tests/test_sm120_smem.py checks that they agree).
template <int kBK_, int kStages_, int kScratch_>
struct MtCfg {
  static constexpr int kBK = kBK_, kStages = kStages_, kScratch = kScratch_;
  static constexpr int kABytes = kMtBM * kBK, kStageBytes = (kMtBM + kMtBN) * kBK;
  static constexpr int kSmemBytes = kStages * kStageBytes + kScratch + 2 * kStages * 8 + 1024;
  static_assert(kBK == 128 || kBK == 64, "k-tiles of 128 or 64 bytes");
};
using MtBig = MtCfg<128, 4, kMtScratchBytes>;
using MtSm120 = MtCfg<64, 4, 0>;
using MtSm120Scratch = MtCfg<64, 3, 16 * 1024>;
// The plain GEMM's plans by number (kernels/gemm_mma_tma.cu): 0 MtBig, 1 MtSm120.
template <int kPlan>
struct MtPlan {
  using Cfg = MtBig;
};
template <>
struct MtPlan<1> {
  using Cfg = MtSm120;
};
static_assert(MtSm120::kSmemBytes <= kSm120SmemLimit, "MtSm120 must fit sm_120's 99 KiB");
static_assert(MtSm120Scratch::kSmemBytes <= kSm120SmemLimit, "MtSm120Scratch must fit 99 KiB");

H3_DEVICE u32 swz128(u32 base, int r, int c) { return base + r * 128 + (((c ^ r) & 7) << 4); }
H3_DEVICE u32 swz64(u32 base, int r, int c) { return base + r * 64 + (((c ^ (r >> 1)) & 3) << 4); }
// 16-byte chunk c of row r in a k-tile of kBK bytes (TMA's swizzle of the same span).
template <int kBK>
H3_DEVICE u32 swz_bk(u32 base, int r, int c) {
  if constexpr (kBK == 128) return swz128(base, r, c);
  else return swz64(base, r, c);
}

// The skeleton; `epi(acc, row0, col0, wm, wn, scratch)` runs once per tile in every warp, with
// acc[mi][ni][r] the warp's 64 x 64 block at rows row0 + wm + 16 mi + mma_c_row(lane, r), columns
// col0 + wn + 8 ni + mma_c_col(lane, r), and `scratch` the Cfg::kScratch bytes of shared memory
// behind the ring (all 256 threads reach the epilogue together, so it may __syncthreads()).
template <int kFmt, class Epi, bool kWS = false, class Cfg = MtBig>
H3_DEVICE void gemm_mma_tma_body(const TmaDesc& desc_a, const TmaDesc& desc_b, int M, int N,
                                 int k_bytes, const Epi& epi) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  extern __shared__ u8 smem_raw[];
  require_dynamic_smem(Cfg::kSmemBytes);
  u8* smem = reinterpret_cast<u8*>((reinterpret_cast<u64>(smem_raw) + 1023) & ~u64(1023));
  constexpr int kStages = Cfg::kStages, kBK = Cfg::kBK;
  u8* scratch = smem + kStages * Cfg::kStageBytes;
  u64* full = reinterpret_cast<u64*>(scratch + Cfg::kScratch);
  u64* empty = full + kStages;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int k_tiles = k_bytes / kBK;
  const TileOrder order{(M + kMtBM - 1) / kMtBM, (N + kMtBN - 1) / kMtBN, 16};
  constexpr int kElemsPerRow = kFmt == 0 ? kBK / 2 : kBK;  // per k-tile

  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      mbar_init(&full[s], 1);
      mbar_init(&empty[s], 8);
    }
    fence_barrier_init();
  }
  __syncthreads();

  // Loads of k-iteration `j` of this CTA (tile j / k_tiles of its sequence), by thread 0.
  auto produce = [&](int j) {
    const int s = j % kStages;
    if (j >= kStages) mbar_wait(&empty[s], ((j / kStages) & 1) ^ 1);
    int mt, nt;
    order.tile(blockIdx.x + (j / k_tiles) * gridDim.x, mt, nt);
    const int kt = j % k_tiles;
    u8* st = smem + s * Cfg::kStageBytes;
    mbar_arrive_expect_tx(&full[s], Cfg::kStageBytes);
    tma_load_2d(st, &desc_a, kt * kElemsPerRow, mt * kMtBM, &full[s]);
    tma_load_2d(st + Cfg::kABytes, &desc_b, kt * kElemsPerRow, nt * kMtBN, &full[s]);
  };
  const int my_tiles = blockIdx.x < order.count()
                           ? (order.count() - blockIdx.x + gridDim.x - 1) / gridDim.x
                           : 0;
  const int total = my_tiles * k_tiles;  // k-iterations of this CTA
  if constexpr (kWS) {
    if (warp < 4) {  // the producer warpgroup
      setmaxnreg_dec<40>();
      if (threadIdx.x == 0)
        for (int j = 0; j < total; ++j) produce(j);
      return;
    }
    setmaxnreg_inc<232>();
  } else if (threadIdx.x == 0) {
    for (int j = 0; j < kStages - 1 && j < total; ++j) produce(j);
  }

  const int cw = kWS ? warp - 4 : warp;  // consumer warp 0 .. 7
  const int wm = (cw / 4) * 64, wn = (cw % 4) * 64;
  float acc[4][8][4];
  int it = 0;
  for (int t = blockIdx.x; t < order.count(); t += gridDim.x) {
    int mt_, nt_;
    order.tile(t, mt_, nt_);
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
      for (int j = 0; j < 8; ++j)
#pragma unroll
        for (int r = 0; r < 4; ++r) acc[i][j][r] = 0.f;
    for (int kt = 0; kt < k_tiles; ++kt, ++it) {
      if (!kWS && threadIdx.x == 0 && it + kStages - 1 < total) produce(it + kStages - 1);
      const int s = it % kStages;
      mbar_wait(&full[s], (it / kStages) & 1);
      const u32 sa = smem_addr(smem + s * Cfg::kStageBytes);
      const u32 sb = sa + Cfg::kABytes;
#pragma unroll
      for (int ks = 0; ks < kBK / 32; ++ks) {  // 32-byte k-steps: chunks 2 ks, 2 ks + 1
        u32 af[4][4];
#pragma unroll
        for (int mi = 0; mi < 4; ++mi) {
          const int r = wm + mi * 16 + (lane & 15);
          asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
                       : "=r"(af[mi][0]), "=r"(af[mi][1]), "=r"(af[mi][2]), "=r"(af[mi][3])
                       : "r"(swz_bk<kBK>(sa, r, 2 * ks + (lane >> 4)))
                       : "memory");
        }
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ == 900
        // NOTE: sm_90 has no FP8 mma.sync: convert each e4m3 fragment to f16 once (ptxas would
        // unpack per MMA, and spill at this tile size) and run two f16 k16 MMAs per k32.
        u32 a16[4][2][4];
        if constexpr (kFmt == 1) {
#pragma unroll
          for (int mi = 0; mi < 4; ++mi) e4m3_frag_a_to_f16(af[mi], a16[mi][0], a16[mi][1]);
        }
#endif
        // B in pairs of n8 blocks: one ldmatrix.x4, then its 8 MMAs (keeps 4 B registers live).
#pragma unroll
        for (int np = 0; np < 4; ++np) {
          u32 bfr[4];
          const int r = wn + np * 16 + (lane & 7) + ((lane >> 4) << 3);
          asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
                       : "=r"(bfr[0]), "=r"(bfr[1]), "=r"(bfr[2]), "=r"(bfr[3])
                       : "r"(swz_bk<kBK>(sb, r, 2 * ks + ((lane >> 3) & 1)))
                       : "memory");
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const int ni = 2 * np + h;
            const u32 b[2] = {bfr[2 * h], bfr[2 * h + 1]};
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ == 900
            if constexpr (kFmt == 1) {
              u32 b16[2][2];
              e4m3_frag_b_to_f16(b, b16[0], b16[1]);
#pragma unroll
              for (int mi = 0; mi < 4; ++mi) {
                mma_f16_16816(acc[mi][ni], a16[mi][0], b16[0]);
                mma_f16_16816(acc[mi][ni], a16[mi][1], b16[1]);
              }
              continue;
            }
#endif
#pragma unroll
            for (int mi = 0; mi < 4; ++mi) {
              if constexpr (kFmt == 0) {
                mma_bf16_16816(acc[mi][ni], af[mi], b);
              } else if constexpr (kFmt == 1) {
                mma_e4m3_16832(acc[mi][ni], af[mi], b);
              } else {
                mma_mxf8f6f4_e4m3_16832(acc[mi][ni], af[mi], b, kUnitUe8m0x4, kUnitUe8m0x4);
              }
            }
          }
        }
      }
      // NOTE: ptxas places the arrival that frees the stage right behind the warp's last
      // ldmatrix, above the MMAs that consume it, and the arrival does not wait for those reads.
      // So each lane first orders its reads of the stage before the refill's async-proxy (TMA)
      // writes. Without this fence the producer-warpgroup form (kWS), which refills as soon as
      // the last warp arrives, gave wrong, unrepeatable products on the H200 (benchmarks/NOTES.md,
      // session 15); the thread-0 form refills only after warp 0's own MMAs and never showed it,
      // but the pattern is the same, so every form fences (session 16).
      fence_proxy_async_smem();
      __syncwarp();
      if (lane == 0) mbar_arrive(&empty[s]);
    }

    epi(acc, mt_ * kMtBM, nt_ * kMtBN, wm, wn, scratch);
  }
#else
  __trap();
#endif
}

// The plain epilogue: C = bf16(((acc * row_scale[m]) * col_scale[n]) * alpha), scales optional,
// two adjacent columns per 4-byte store.
struct EpiMmaScaleBf16 {
  const float* __restrict__ row_scale;
  const float* __restrict__ col_scale;
  bf16_t* __restrict__ C;
  int M, N;
  float alpha = 1.f;  // a last factor (the NVFP4 GEMM's); multiplying by 1 is exact

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
        const float rs = row_scale != nullptr ? row_scale[row] : 1.f;
#pragma unroll
        for (int ni = 0; ni < 8; ++ni) {
          const int col = n0 + ni * 8 + mma_c_col(lane, 2 * h);
          if (col >= N) continue;
          float2 cs = make_float2(1.f, 1.f);
          if (col_scale != nullptr) cs = *reinterpret_cast<const float2*>(col_scale + col);
          const float v0 = ((acc[mi][ni][2 * h] * rs) * cs.x) * alpha;
          const float v1 = ((acc[mi][ni][2 * h + 1] * rs) * cs.y) * alpha;
          *reinterpret_cast<u32*>(C + static_cast<i64>(row) * N + col) =
              pack_bf16x2(f32_to_bf16(v0), f32_to_bf16(v1));
        }
      }
  }
};

// y of the quantized ops on the mma.sync fragment (acc[mi][ni][r] at rows row0 + wm + 16 mi +
// mma_c_row(lane, r), columns col0 + wn + 8 ni + mma_c_col(lane, r)), rounded to bf16 in place.
// NVFP4 (W4A4): y = bf16(acc * alpha).
struct MmaYAlpha {
  float alpha;
  H3_DEVICE void operator()(float (&acc)[4][8][4], int, int, int, int) const {
#pragma unroll
    for (int mi = 0; mi < 4; ++mi)
#pragma unroll
      for (int ni = 0; ni < 8; ++ni)
#pragma unroll
        for (int r = 0; r < 4; ++r) acc[mi][ni][r] = round_bf16(acc[mi][ni][r] * alpha);
  }
};

// FP8 (W8A8): y = bf16((acc * act_scale[m]) * w_scale[n]); rows past M and columns past N get a
// zero scale. The 8 weight-scale pairs are loaded before any is used.
struct MmaYRowCol {
  const float* __restrict__ act_scale;  // [M]
  const float* __restrict__ w_scale;    // [N]
  int M, N;
  H3_DEVICE void operator()(float (&acc)[4][8][4], int row0, int col0, int wm, int wn) const {
    const int lane = threadIdx.x % 32, q4 = lane % 4;
    float2 ws[8];
#pragma unroll
    for (int ni = 0; ni < 8; ++ni) {
      const int col = col0 + wn + 8 * ni + 2 * q4;
      ws[ni] = col < N ? *reinterpret_cast<const float2*>(w_scale + col) : make_float2(0.f, 0.f);
    }
#pragma unroll
    for (int mi = 0; mi < 4; ++mi)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int row = row0 + wm + 16 * mi + lane / 4 + 8 * h;
        const float as = row < M ? act_scale[row] : 0.f;
#pragma unroll
        for (int ni = 0; ni < 8; ++ni) {
          acc[mi][ni][2 * h] = round_bf16((acc[mi][ni][2 * h] * as) * ws[ni].x);
          acc[mi][ni][2 * h + 1] = round_bf16((acc[mi][ni][2 * h + 1] * as) * ws[ni].y);
        }
      }
  }
};

}  // namespace h3
