// NVFP4 x NVFP4 GEMM skeleton on the TMA-fed mma.sync back end (sm_120a native, sm_90a
// emulated): acc = sum_k (e2m1(A) * sfa) * (e2m1(B) * sfb) (fp32 accumulation), handed to an
// epilogue functor (kernels/gemm_nvfp4.cu: C = bf16(acc * alpha); kernels/out_proj.cu).
//
// Operands (SPEC section 1): A codes uint8 [M, K/2] (element 2j in the low nibble of byte j),
// A scales ue4m3 [M, K/16] linear; B codes uint8 [N, K/2], B scales 128x4-swizzled (flat
// ceil(N/128)*128 * c4*4 bytes, c4 = ceil(K/64)); alpha fp32.
//
// * Stages of 2 kBK K-elements (kBK code bytes, 128 or 64): A codes (TMA, swizzled over kBK
//   bytes, 128 rows), B codes (256 rows), A scales (TMA box of 16 bytes x 128 rows, holding the
//   k-tile's kBK / 8 columns at byte (kt * kBK % 128) / 8 of each row), B scales (two 1-D bulk
//   copies of 16 kBK bytes: for a 128-row group the kBK / 8 scale columns of a k-tile are kBK /
//   32 consecutive 512-byte blocks of the swizzled layout). kBK = 64: 28 KiB per stage, 3 stages
//   (sm_120's 99 KiB); kBK = 128: 54 KiB (Hopper only).
// * 8 warps of 64 x 64, one k64 MMA step per 32 code bytes. The scale bytes of row / column r
//   for k64 step ks are 4 consecutive bytes in shared memory, byte j = K-block j:
//   A at r * 16 + (kt * kBK % 128) / 8 + 4 ks; B at (r / 128) * 16 kBK + ks * 512 + (r % 32) * 16
//   + ((r % 128) / 32) * 4.
// * sm_120a: mma.sync kind::mxf4nvf4.block_scale.scale_vec::4X.m16n8k64 with selectors {0, 0}:
//   lane l supplies A's scales for row l / 4 + 8 (l % 2) of the m16 block and B's for column
//   l / 4 of the n8 block (PTX ISA 9.1 section 9.7.14.3; the row-per-lane map and byte order as
//   in CUTLASS's SM120 SFA/SFB layouts).
// * Other targets (sm_90a): the k64 fragments are dequantized in registers to bf16 (exact:
//   an e2m1 x ue4m3 product has at most 6 significant bits) and run as four bf16 k16 MMAs with a
//   K permutation shared by A and B (MMA t takes byte t of every fragment register). Correct, not
//   fast: a reference of the data path on the H200; the fast Hopper path dequantizes in shared
//   memory for wgmma.
// The sm_90a emulation is verified on the H200 (2026-12-01); the sm_120a OMMA path is compile-
// and SASS-checked only (no SM120 board).
#pragma once
#include "h3/gemm_mma_tma.cuh"

namespace h3 {

constexpr int kNvBM = 128, kNvBN = 256;
// Stage bytes of a kBK-code-byte k-tile: A and B codes, the A-scale box (16 bytes x 128 rows:
// this k-tile's kBK / 8 scale bytes per row, and for kBK = 64 the neighbouring k-tile's too), and
// two 128-row groups of B scales (kBK / 32 blocks of 512 bytes each).
template <int kBK>
struct NvStage {
  static constexpr int kBytes = kNvBM * kBK + kNvBN * kBK + kNvBM * 16 + 2 * 16 * kBK;
};
// Shared memory of gemm_nvfp4_body<Epi, kStages, kScratch, kBK>: NvSmem (mirrored in
// h3cupy/ops/gemm.py). kBK = 128 (54 KiB stages) fits only Hopper-sized shared memory; the
// kernels use kBK = 64 (28 KiB stages), whose 3-stage ring (plus 8 KiB of scratch for the
// pre-attention epilogue) fits sm_120's 99 KiB.
template <int kBK, int kStages, int kScratch>
struct NvSmem {
  static constexpr int kBytes = kStages * NvStage<kBK>::kBytes + kScratch + 2 * kStages * 8 + 1024;
};
constexpr int kNvSm120BK = 64, kNvSm120Stages = 3, kNvSm120PaScratch = 8 * 1024;
static_assert(NvSmem<kNvSm120BK, kNvSm120Stages, kNvSm120PaScratch>::kBytes <= kSm120SmemLimit,
              "the NVFP4 sm_120 plan must fit 99 KiB");

H3_DEVICE float ue4m3_byte(u32 word, int j) { return e4m3_to_f32(static_cast<u8>(word >> (8 * j))); }

// The skeleton; `epi(acc, row0, col0, wm, wn, scratch)` runs once per tile in every warp with the
// warp's 64 x 64 block (the layout of h3/gemm_mma_tma.cuh); `scratch` is kScratch bytes of
// shared memory behind the ring (all 256 threads reach the epilogue together).
template <class Epi, int kStages, int kScratch, int kBK>
H3_DEVICE void gemm_nvfp4_body(const TmaDesc& desc_a, const TmaDesc& desc_b,
                               const TmaDesc& desc_sfa, const u8* __restrict__ sfb, int sfb_c4,
                               int M, int N, int k_bytes, const Epi& epi) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  extern __shared__ u8 smem_raw[];
  require_dynamic_smem(NvSmem<kBK, kStages, kScratch>::kBytes);
  u8* smem = reinterpret_cast<u8*>((reinterpret_cast<u64>(smem_raw) + 1023) & ~u64(1023));
  constexpr int kABytes = kNvBM * kBK, kBBytes = kNvBN * kBK, kSfaBytes = kNvBM * 16;
  constexpr int kSfbGroup = 16 * kBK, kStageBytes = NvStage<kBK>::kBytes;
  u8* scratch = smem + kStages * kStageBytes;
  u64* full = reinterpret_cast<u64*>(scratch + kScratch);
  u64* empty = full + kStages;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4;
  [[maybe_unused]] const int q4 = lane % 4;  // (the block-scale bytes of the sm_90a emulation)
  const int k_tiles = k_bytes / kBK;
  const int row_groups = (N + 127) / 128;
  const TileOrder order{(M + kNvBM - 1) / kNvBM, (N + kNvBN - 1) / kNvBN, 16};

  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      mbar_init(&full[s], 1);
      mbar_init(&empty[s], 8);
    }
    fence_barrier_init();
  }
  __syncthreads();

  auto produce = [&](int j) {
    const int s = j % kStages;
    if (j >= kStages) mbar_wait(&empty[s], ((j / kStages) & 1) ^ 1);
    int mt, nt;
    order.tile(blockIdx.x + (j / k_tiles) * gridDim.x, mt, nt);
    const int kt = j % k_tiles;
    u8* st = smem + s * kStageBytes;
    const int rg0 = nt * 2, groups = min(2, row_groups - rg0);
    mbar_arrive_expect_tx(&full[s], kABytes + kBBytes + kSfaBytes + groups * kSfbGroup);
    tma_load_2d(st, &desc_a, kt * kBK, mt * kNvBM, &full[s]);
    tma_load_2d(st + kABytes, &desc_b, kt * kBK, nt * kNvBN, &full[s]);
    tma_load_2d(st + kABytes + kBBytes, &desc_sfa, (kt * kBK / 128) * 16, mt * kNvBM, &full[s]);
    for (int r = 0; r < groups; ++r) {
      const u8* src = sfb + (static_cast<i64>(rg0 + r) * sfb_c4 + (kBK / 32) * kt) * 512;
      asm volatile(
          "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, "
          "[%3];" ::"r"(smem_addr(st + kABytes + kBBytes + kSfaBytes + r * kSfbGroup)),
          "l"(src), "n"(kSfbGroup), "r"(smem_addr(&full[s]))
          : "memory");
    }
  };
  const int my_tiles =
      blockIdx.x < order.count() ? (order.count() - blockIdx.x + gridDim.x - 1) / gridDim.x : 0;
  const int total = my_tiles * k_tiles;
  if (threadIdx.x == 0)
    for (int j = 0; j < kStages - 1 && j < total; ++j) produce(j);

  const int wm = (warp / 4) * 64, wn = (warp % 4) * 64;
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
      if (threadIdx.x == 0 && it + kStages - 1 < total) produce(it + kStages - 1);
      const int s = it % kStages;
      mbar_wait(&full[s], (it / kStages) & 1);
      u8* st = smem + s * kStageBytes;
      const u32 sa = smem_addr(st), sb = sa + kABytes;
      const u8* sfa_s = st + kABytes + kBBytes + (kt * kBK % 128) / 8;  // this k-tile's columns
      const u8* sfb_s = st + kABytes + kBBytes + kSfaBytes;
      // The 4 scale bytes of local B column n for k64 step ks (byte j = K-block j).
      auto sfb_word = [&](int n, int ks) {
        return *reinterpret_cast<const u32*>(sfb_s + (n / 128) * kSfbGroup + ks * 512 +
                                             (n % 32) * 16 +
                                             ((n % 128) / 32) * 4);
      };
// NOTE: not unrolled: ks only offsets addresses, and a 4x unrolled step (native) keeps ~255
// registers live and spills at the 255 cap; the emulated step is large anyway.
#pragma unroll 1
      for (int ks = 0; ks < kBK / 32; ++ks) {  // k64 steps of 32 code bytes
        u32 af[4][4];
#pragma unroll
        for (int mi = 0; mi < 4; ++mi) {
          const int r = wm + mi * 16 + (lane & 15);
          asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
                       : "=r"(af[mi][0]), "=r"(af[mi][1]), "=r"(af[mi][2]), "=r"(af[mi][3])
                       : "r"(swz_bk<kBK>(sa, r, 2 * ks + (lane >> 4)))
                       : "memory");
        }
        auto load_b = [&](int np, u32(&bfr)[4]) {
          const int r = wn + np * 16 + (lane & 7) + ((lane >> 4) << 3);
          asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
                       : "=r"(bfr[0]), "=r"(bfr[1]), "=r"(bfr[2]), "=r"(bfr[3])
                       : "r"(swz_bk<kBK>(sb, r, 2 * ks + ((lane >> 3) & 1)))
                       : "memory");
        };
#if H3_HAS_SM120_MMA
        u32 sfa_r[4];
#pragma unroll
        for (int mi = 0; mi < 4; ++mi)
          sfa_r[mi] = *reinterpret_cast<const u32*>(
              sfa_s + (wm + 16 * mi + g + 8 * (lane % 2)) * 16 + 4 * ks);
#pragma unroll
        for (int np = 0; np < 4; ++np) {
          u32 bfr[4];
          load_b(np, bfr);
#pragma unroll
          for (int h2 = 0; h2 < 2; ++h2) {
            const int ni = 2 * np + h2;
            const u32 b[2] = {bfr[2 * h2], bfr[2 * h2 + 1]};
            const u32 sfb_r = sfb_word(wn + 8 * ni + g, ks);
#pragma unroll
            for (int mi = 0; mi < 4; ++mi)
              mma_mxf4nvf4_16864(acc[mi][ni], af[mi], b, sfa_r[mi], sfb_r);
          }
        }
#else
        // Emulation. Scales of this thread's elements: A rows g, g + 8 and B column g, K-blocks
        // q4 / 2 (registers 0, 1 of A, 0 of B) and 2 + q4 / 2 (registers 2, 3 of A, 1 of B).
        // NOTE: kept lean on registers (scales re-read from shared memory, B re-loaded per tt):
        // this path is a correctness reference, not the fast Hopper NVFP4 path.
#pragma unroll 1
        for (int tt = 0; tt < 4; ++tt) {  // byte tt of every register: one bf16 k16 MMA
          u32 a16[4][4];
#pragma unroll
          for (int mi = 0; mi < 4; ++mi)
#pragma unroll
            for (int h = 0; h < 2; ++h) {
              const u32 w =
                  *reinterpret_cast<const u32*>(sfa_s + (wm + 16 * mi + g + 8 * h) * 16 + 4 * ks);
              a16[mi][h] = e2m1x2_scaled_bf16x2(af[mi][h], tt, ue4m3_byte(w, q4 / 2));
              a16[mi][2 + h] = e2m1x2_scaled_bf16x2(af[mi][2 + h], tt, ue4m3_byte(w, 2 + q4 / 2));
            }
#pragma unroll
          for (int np = 0; np < 4; ++np) {
            u32 bfr[4];
            load_b(np, bfr);
#pragma unroll
            for (int h2 = 0; h2 < 2; ++h2) {
              const int ni = 2 * np + h2;
              const u32 w = sfb_word(wn + 8 * ni + g, ks);
              const u32 b16[2] = {
                  e2m1x2_scaled_bf16x2(bfr[2 * h2], tt, ue4m3_byte(w, q4 / 2)),
                  e2m1x2_scaled_bf16x2(bfr[2 * h2 + 1], tt, ue4m3_byte(w, 2 + q4 / 2))};
#pragma unroll
              for (int mi = 0; mi < 4; ++mi) mma_bf16_16816(acc[mi][ni], a16[mi], b16);
            }
          }
        }
#endif
      }
      fence_proxy_async_smem();  // the reads of the stage before its refill (gemm_mma_tma.cuh)
      __syncwarp();
      if (lane == 0) mbar_arrive(&empty[s]);
    }

    epi(acc, mt_ * kNvBM, nt_ * kNvBN, wm, wn, scratch);
  }
#else
  __trap();
#endif
}


// alpha: given on the device, or 1 / (g_act * g_w) formed on the device from the global scales
// (the weight's may be a host value), or a host value.
struct Nvfp4Alpha {
  const float* alpha_ptr;
  const float* ga_ptr;
  const float* gw_ptr;
  float gw_host, alpha_host;
  H3_DEVICE float get() const {
    if (alpha_ptr != nullptr) return *alpha_ptr;
    if (ga_ptr != nullptr)
      return __frcp_rn(__fmul_rn(*ga_ptr, gw_ptr != nullptr ? *gw_ptr : gw_host));
    return alpha_host;
  }
};

}  // namespace h3
