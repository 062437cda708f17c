// The quantized pre-attention epilogue on the sm_90a engine's wgmma fragment (SPEC.md section 4),
// shared by the FP8 op (pre_attention_fp8.cu) and the NVFP4 op's Hopper path
// (pre_attention_nvfp4.cu): y by a scaling policy (WgYRowCol, WgYAlpha), Q/K RMSNorm + RoPE
// (h3/pre_attention.cuh), then the out mode:
//   kOut 0 "bf16":  q, k, v bf16 [M, 56, 128]
//   kOut 1 "e4m3":  e4m3(v * os), os = RN(1 / fp32(descale)) of the kind, [M, 56, 128]
//   kOut 2 "nvfp4": NVFP4 per 16 channels of a head (SPEC section 1) with the kind's global scale:
//                   codes uint8 [M, 56, 64], linear ue4m3 scales uint8 [M, 56, 8]
// Outputs go through the warpgroup's 16 KiB staging buffer and TMA stores (2-D tensor maps of
// each output viewed as [M, columns], which clip rows past M); the NVFP4 scales are single-byte
// global stores. One head (128 columns) per warpgroup fragment (128 x 128 tiles), or two
// through EpiTwoHeads (128 x 256 tiles).
#pragma once
#include "h3/gemm_sm90.cuh"
#include "h3/pre_attention.cuh"
#include "h3/quant.cuh"

namespace h3 {

enum PaOut : int { kPaOutBf16 = 0, kPaOutE4m3 = 1, kPaOutNvfp4 = 2 };


// e4m3 codes of a warpgroup's 64 x 128 fragment into a 128B-swizzled 64 x 128-byte box (16-byte
// chunk c of row r at chunk c ^ (r % 8)), then one TMA store.
// kWaitRead = false: no wait for earlier stores' reads of `staging` (as store_fragment_bf16_boxes).
template <bool kWaitRead = true, class StoreBox>
H3_DEVICE void store_fragment_e4m3(const float (&d)[64], float os, u8* staging, int bar_id,
                                   const StoreBox& store) {
  const int tid = threadIdx.x % 128, lane = tid % 32, w = tid / 32, q4 = lane % 4;
  const u32 base = smem_addr(staging);
  if (tid == 0 && kWaitRead) bulk_wait_read();
  named_barrier_sync(bar_id, 128);
#pragma unroll
  for (int j = 0; j < 16; ++j)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = 16 * w + lane / 4 + 8 * h;
      const u16 v = static_cast<u16>(e4m3x2(d[4 * j + 2 * h] * os, d[4 * j + 2 * h + 1] * os));
      const u32 addr = base + r * 128 + (((j / 2) ^ (lane / 4)) * 16) + 8 * (j % 2) + 2 * q4;
      asm volatile("st.shared.u16 [%0], %1;" ::"r"(addr), "h"(v) : "memory");
    }
  fence_proxy_async_smem();
  named_barrier_sync(bar_id, 128);
  if (tid == 0) {
    store(staging);
    bulk_commit();
  }
}

// NVFP4 of a warpgroup's 64 x 128 fragment (one head): per row, 8 blocks of 16 channels; a
// block's 16 values sit in the 4 lanes of a quad (groups j = 2b, 2b + 1), so two shuffles give its
// amax. Codes (element 2i in the low nibble of byte i) go to a plain 64 x 64-byte box and one TMA
// store; each scale byte is written by lane q4 == b % 4 of the quad.
template <bool kWaitRead = true, class StoreBox>
H3_DEVICE void store_fragment_nvfp4(const float (&d)[64], float g, u8* staging, int bar_id,
                                    int row0, int M, u8* __restrict__ sf_row0, int sf_row_stride,
                                    const StoreBox& store) {
  const int tid = threadIdx.x % 128, lane = tid % 32, w = tid / 32, q4 = lane % 4;
  if (tid == 0 && kWaitRead) bulk_wait_read();
  named_barrier_sync(bar_id, 128);
#pragma unroll
  for (int b = 0; b < 8; ++b)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const float v0 = d[4 * (2 * b) + 2 * h], v1 = d[4 * (2 * b) + 2 * h + 1];
      const float v2 = d[4 * (2 * b + 1) + 2 * h], v3 = d[4 * (2 * b + 1) + 2 * h + 1];
      float amax = fmaxf(fmaxf(fabsf(v0), fabsf(v1)), fmaxf(fabsf(v2), fabsf(v3)));
      amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, 1));
      amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, 2));
      const Nvfp4Scale sc = nvfp4_scale(amax, g);
      const u32 c0 = e2m1(v0 * sc.os) | (e2m1(v1 * sc.os) << 4);
      const u32 c1 = e2m1(v2 * sc.os) | (e2m1(v3 * sc.os) << 4);
      const int r = 16 * w + lane / 4 + 8 * h;
      u8* row = staging + r * 64;
      row[8 * b + q4] = static_cast<u8>(c0);
      row[8 * b + 4 + q4] = static_cast<u8>(c1);
      if (q4 == (b & 3) && row0 + r < M) sf_row0[static_cast<i64>(r) * sf_row_stride + b] = sc.sf;
    }
  fence_proxy_async_smem();
  named_barrier_sync(bar_id, 128);
  if (tid == 0) {
    store(staging);
    bulk_commit();
  }
}


// y = bf16((acc * act_scale[m]) * w_scale[n]) on a warpgroup's 64 x 128 fragment (the FP8 op).
// load() issues the row scales' loads (with the math's, one batch); the column scales (512 bytes
// per tile, read by every warp of the CTA) are read in apply(): they stay in L1.
// kLive: act_scale is written during this launch (the single launch's rows, h3/norm_rows.cuh),
// so it is read through L2 (a line of it cached in L1 earlier could be stale).
template <bool kLive = false>
struct WgYRowColT {
  const float* __restrict__ act_scale;  // [M]
  const float* __restrict__ w_scale;    // [21504]
  struct Ops {
    float as[2];  // this thread's two rows
  };
  H3_DEVICE void load(Ops& o, int row0, int M) const {
    const int lane = threadIdx.x % 32, w = (threadIdx.x % 128) / 32;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int row = row0 + 16 * w + lane / 4 + 8 * h;
      o.as[h] = row < M ? (kLive ? __ldcg(act_scale + row) : act_scale[row]) : 0.f;
    }
  }
  H3_DEVICE void apply(float (&d)[64], int col0, const Ops& o) const {
    apply_groups<0, 16>(d, col0, o);
  }
  // The 8-column groups [kJ0, kJ1) of a fragment whose group j holds columns col0 + 8 j ..
  template <int kJ0, int kJ1, int kAcc>
  H3_DEVICE void apply_groups(float (&d)[kAcc], int col0, const Ops& o) const {
    static_assert(0 <= kJ0 && kJ0 < kJ1 && 4 * kJ1 <= kAcc, "groups inside the fragment");
    const int q4 = threadIdx.x % 4;
#pragma unroll
    for (int j = kJ0; j < kJ1; ++j) {
      const float2 ws = *reinterpret_cast<const float2*>(w_scale + col0 + 8 * j + 2 * q4);
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        d[4 * j + 2 * h] = (d[4 * j + 2 * h] * o.as[h]) * ws.x;
        d[4 * j + 2 * h + 1] = (d[4 * j + 2 * h + 1] * o.as[h]) * ws.y;
        round_bf16x2(d[4 * j + 2 * h], d[4 * j + 2 * h + 1]);
      }
    }
  }
};

using WgYRowCol = WgYRowColT<false>;

// y = bf16(acc * alpha) (the NVFP4 op on dequantized bf16 operands).
struct WgYAlpha {
  float alpha;
  struct Ops {};
  H3_DEVICE void load(Ops&, int, int) const {}
  H3_DEVICE void apply(float (&d)[64], int, const Ops&) const {
#pragma unroll
    for (int i = 0; i < 64; i += 2) {
      d[i] *= alpha;
      d[i + 1] *= alpha;
      round_bf16x2(d[i], d[i + 1]);
    }
  }
};

// The quantized pre-attention epilogue on the wgmma fragment: y by the Scale policy, the per-head
// math, the out mode through staging and TMA stores. The row-dependent global operands (row
// scales, RoPE rows, the out scalar) are loaded before any of them is used.
template <int kOut, class Scale>
struct EpiPreAttnQkv {
  PreAttnMath math;
  Scale scale;
  const TmaDesc* desc[3];               // q, k, v outputs viewed as [M, columns]
  u8* sf_out[3];                        // NVFP4 scales [M, 56, 8] (kOut 2)
  PaKindScalar scalar[3];               // e4m3: descale; nvfp4: global scale

  template <int kAcc>
  H3_DEVICE void operator()(float (&d)[kAcc], int row0, int col0, u8* staging, int wg) const {
    static_assert(kAcc == 64, "one head (128 columns) per warpgroup fragment");
    head<false>(d, row0, col0, staging, wg);
  }

  // One head at columns col0.. (a multiple of 128); kScaled: d already holds y (scaled and
  // rounded to bf16), else the Scale policy forms it here. kZeroOps: the RoPE operands start at
  // zero (V heads load none): with several heads in one epilogue, ptxas otherwise carried the
  // unloaded ones from head to head through local memory. kWaitRead = false: `staging` is a
  // buffer no pending store reads (the stores skip their wait).
  template <bool kScaled, bool kZeroOps = false, bool kWaitRead = true>
  H3_DEVICE void head(float (&d)[64], int row0, int col0, u8* staging, int wg) const {
    const int M = math.M;
    const int kind = col0 / kPaKindCols, head = (col0 % kPaKindCols) / kPaHeadDim;
    typename Scale::Ops so;
    PaOperands po;
    if constexpr (kZeroOps) po = PaOperands{};
    int p[2];
    if constexpr (!kScaled) scale.load(so, row0, M);
#ifndef H3_PA_NOMATH
    math.positions(row0, p);
    math.load_half(po, p, col0, 0);
#endif
    // the kind's out scalar (a device value for e4m3 / nvfp4) joins the batch
    const float sv = kOut == kPaOutBf16 ? 0.f : pick3(scalar, kind).get();
    if constexpr (!kScaled) scale.apply(d, col0, so);
    // -DH3_PA_NOMATH (timing only, scripts/probe_engine.py --ab panomath): no RMSNorm / RoPE,
    // wrong outputs; what the math costs the tile
#ifndef H3_PA_NOMATH
    math.template apply<true, 1, -1, kOut == kPaOutBf16 && kPaPack>(d, col0, po, p);
#else
    (void)po;
    (void)p;
#endif
    const TmaDesc* dk = pick3(desc, kind);
    if constexpr (kOut == kPaOutBf16) {
      auto box_store = [&](int, int box, const u8* src) {
        tma_store_2d(dk, src, head * kPaHeadDim + 64 * box, row0);
      };
      store_fragment_bf16<64, decltype(box_store), kStagingBoxes, kWaitRead, 0, -1, kPaPack>(
          d, staging, wg, box_store);
    } else if constexpr (kOut == kPaOutE4m3) {
      store_fragment_e4m3<kWaitRead>(d, __frcp_rn(sv), staging, wg, [&](const u8* src) {
        tma_store_2d(dk, src, head * 128, row0);
      });
    } else {
      u8* sf0 = pick3(sf_out, kind) + (static_cast<i64>(row0) * kPaHeads + head) * 8;
      store_fragment_nvfp4<kWaitRead>(
          d, sv, staging, wg, row0, M, sf0, kPaHeads * 8,
          [&](const u8* src) { tma_store_2d(dk, src, head * 64, row0); });
    }
  }
};

// 128 x 192 tiles in N-tile pairs (the engine's kPairN; the FP8 op, Scale = WgYRowCol): a pair
// covers 384 columns, three whole heads, and the middle head B straddles its two tiles. A
// warpgroup's 64 x 192 fragment holds 24 8-column groups, d[4 j .. 4 j + 3] for group j.
// * First tile (columns c .. c + 191): groups 16-23 (head B's first 64 columns) are scaled,
//   rounded to y = bf16(...) and kept in the vector area as stash words 0-15; then head A
//   (groups 0-15) runs whole.
// * Second tile (columns c + 192 ..): groups 0-7 (head B's last 64 columns) go to stash words
//   16-31 the same way; head C (groups 8-23) runs whole; then head B is read back from the 32
//   words into groups 8-23's registers and runs as an already scaled head.
// Word i of thread t sits at (128 i + t) x 4 bytes: a thread reads back only its own words (the
// thread holding a column of head B in the first tile holds the column 64 on in the second, with
// the same rows), so no value crosses threads and no barrier is needed. Stashing before the
// whole head keeps at most 64 values live beside it (held across it, ptxas spilled). r = bf16(y)
// is what SPEC section 3 normalizes, so the stash's bf16 is exact.
template <int kOut, bool kLive = false>  // kLive: WgYRowColT's (the single launch)
struct EpiPreAttnPair {
  EpiPreAttnQkv<kOut, WgYRowColT<kLive>> one;
  static constexpr bool kPairN = true;
  static constexpr int kVecBytes = 32 * 128 * 4;  // the stash: 16 KiB per warpgroup

  template <int kBN>
  H3_DEVICE void prefetch_vec(int, int, u8*) const {}  // the vector area is the stash only

  // y of groups [kJ0, kJ0 + 8) (columns col0 + 8 j ..) into stash words w0 .. w0 + 15
  template <int kJ0, int kAcc>
  H3_DEVICE void stash_y(float (&d)[kAcc], int row0, int col0, u32 stash, int w0,
                         [[maybe_unused]] int wg) const {
    const int tid = threadIdx.x % 128;
    if (kJ0 == 16) {  // a pair's first tile: the stash was the last pair's head-B staging buffer
      if (tid == 0) bulk_wait_read();
      named_barrier_sync(wg, 128);
    }
    typename WgYRowColT<kLive>::Ops so;
    one.scale.load(so, row0, one.math.M);
    one.scale.template apply_groups<kJ0, kJ0 + 8>(d, col0, so);
#pragma unroll
    for (int j = 0; j < 8; ++j)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const float* v = &d[4 * (kJ0 + j) + 2 * h];
        sts_u32(stash + 4 * (128 * (w0 + 2 * j + h) + tid),
                pack_bf16x2(f32_to_bf16(v[0]), f32_to_bf16(v[1])));
      }
  }

  template <int kAcc>
  H3_DEVICE void operator()(float (&d)[kAcc], int row0, int col0, u8* staging, int wg,
                            u8* vec) const {
    static_assert(kAcc == 96, "a 64 x 192 fragment: one head and a half");
    const int tid = threadIdx.x % 128;
    const u32 stash = smem_addr(vec);
    auto view = [&](int off) -> float(&)[64] { return *reinterpret_cast<float(*)[64]>(&d[off]); };
    if ((col0 / 192) % 2 == 0) {
      stash_y<16>(d, row0, col0, stash, 0, wg);
      one.template head<false, true>(view(0), row0, col0, staging, wg);  // head A
      return;
    }
    stash_y<0>(d, row0, col0, stash, 16, wg);
    one.template head<false, true>(view(32), row0, col0 + 64, staging, wg);  // head C
#pragma unroll
    for (int j = 0; j < 16; ++j)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const u32 w = lds_u32(stash + 4 * (128 * (2 * j + h) + tid));
        d[32 + 4 * j + 2 * h] = bf16_to_f32(static_cast<bf16_t>(w & 0xffffu));
        d[32 + 4 * j + 2 * h + 1] = bf16_to_f32(static_cast<bf16_t>(w >> 16));
      }
    // Head B is staged in the stash, which is free once read back (the store's barrier orders
    // every thread's read-back before the first write): its store does not wait for head C's
    // TMA store to have read `staging`. The next pair's first stash write waits for this
    // store's reads instead (stash_y), a tile's mainloop later (session 20: 0.3-0.8% on the
    // FP8 pre-attention, probe_engine.py --ab pastash).
    one.template head<true, true, false>(view(32), row0, col0 - 64, vec, wg);  // head B
  }
};

// 128 x 256 tiles: a warpgroup fragment holds two heads (8-column groups 0-15 and 16-31, i.e.
// d[0..63] and d[64..127]); the one-head epilogue runs on each in turn.
template <class EpiOneHead>
struct EpiTwoHeads {
  EpiOneHead one;

  template <int kAcc>
  H3_DEVICE void operator()(float (&d)[kAcc], int row0, int col0, u8* staging, int wg) const {
    static_assert(kAcc == 128, "two heads (256 columns) per warpgroup fragment");
    one(*reinterpret_cast<float(*)[64]>(&d[0]), row0, col0, staging, wg);
    one(*reinterpret_cast<float(*)[64]>(&d[64]), row0, col0 + kPaHeadDim, staging, wg);
  }
};

}  // namespace h3
