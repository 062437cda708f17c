// The prologue's rows written inside a GEMM launch (the single-launch forms' producer hooks).
#pragma once
#include "h3/adaln.cuh"
#include "h3/common.cuh"
#include "h3/numeric.cuh"
#include "h3/quant.cuh"
#include "h3/ready_rows.cuh"
#include "h3/reduce.cuh"

namespace h3 {

// The single-launch forms' producer hooks (pre_attention.BF16_FUSED_PROLOGUE: kFp8 false, 128 x
// 256 bf16 tiles in clusters; pre_attention.FP8_FUSED_PROLOGUE: kFp8 true, the FP8 op's 128 x
// 192 tile pairs): the prologue's rows of `a` (SPEC section 2), as bf16 or as per-token FP8 (e4m3
// codes and the fp32 scale), written inside the GEMM launch and published per 128-row tile
// (h3/ready_rows.cuh), as the FP8 out_proj quantizes its activation in its launch (out_proj.cu's
// ProQuantRowsFp8, whose structure this follows):
// * the rows that the first round of tiles reads (r0, the engine's count) by the consumer warps
//   of the whole grid before their first tile (232 registers: many loads in flight);
// * the rest by the three spare warps of every producer warpgroup, one warp per row, in
//   increasing row order across the grid, ahead of the tile order (no shared memory: the bf16
//   ring leaves 1.8 KiB free, so each row is read twice through L2 instead of staged; the FP8
//   form three times: the codes need the row's amax first, and a row of `a` does not fit in a
//   spare warp's 40 registers, so its second pass finds the amax and the third recomputes each
//   value and writes its code).
// The arithmetic and the reduction order are prologue.cu's, so `a` has the prologue's bits:
// virtual thread t = 32 j + lane (j < 11, t < 336) sums the squares of its 16 columns
// [16 t, 16 t + 16) in sequence, each virtual warp j's partials go through warp_sum, and the 11
// warp totals through a second warp_sum (block_sum's order); then per element
//   n = bf16((x * rstd) * w),  s1 = bf16(scale[i] + 1),  a = bf16(fma(n, s1, shift[i])),
// a = 0 for the whole row when i is outside [0, rows) (written without reading x or forming a
// table address). FP8 (prologue.cu's kOutFp8): amax = max |a| over the row (the bf16 bits'
// magnitudes compared as integers: the same order, a NaN winning), s = RN(max(amax, 1e-12) / 448),
// codes RN(a / s) (correctly rounded, h3/quant.cuh), s into act_scale[r].
// Never deadlocks: the writers wait on nothing, and every CTA of the (persistent, fully resident)
// grid runs them whatever its tiles wait for.
template <bool kFp8>
struct ProNormRows : ReadyRows {  // tile_rows [ceil(M / 128)], zero at launch; M
  const bf16_t* __restrict__ x;       // [M, 5376]
  const bf16_t* __restrict__ w;       // [5376]
  const bf16_t* __restrict__ scale;   // [rows, table_stride]
  const bf16_t* __restrict__ shift;
  i64 table_stride, rows;
  const void* __restrict__ index;     // int32 / int64 [M]
  int index_is_64;
  float eps;
  void* a;  // bf16 a or e4m3 codes [M, 5376]: written here, read by the engine's TMA
  float* act_scale;  // kFp8: fp32 [M], written here, read by the epilogue through L2

  static constexpr int kK = 5376;
  static constexpr int kT = kK / 16;         // prologue.cu's threads per row: 336
  static constexpr int kJ = (kT + 31) / 32;  // its warps: 11
  static constexpr int kQ = kK / 8 / 32;     // 16-byte chunks per lane in the second pass: 21
  static_assert(kK % 256 == 0, "whole 16-byte chunks per lane");
  // Batches (loads in flight): spare warps (40 registers) 3 virtual warps (6 loads) / 1 chunk
  // (4 loads); 4 / 1 and 3 / 2 spilled (32-64 bytes, NVRTC 12.9). Consumers 11 / 7.
  static constexpr int kSpareU = 3, kSpareV = 1, kConsU = 11, kConsV = 7;

  struct X2 {
    uint4 v[2];
  };
  struct Chunk {
    uint4 x, w, sc, sh;
  };

  // use(load(i), i) for i = 0..n-1, kB loads in flight: whole batches, then the rest one at a time.
  template <int kB, class L, class U>
  H3_DEVICE static void batched(int n, const L& load, const U& use) {
    using T = decltype(load(0));
    int i = 0;
#pragma unroll 1
    for (; i + kB <= n; i += kB) {
      T v[kB];
#pragma unroll
      for (int u = 0; u < kB; ++u) v[u] = load(i + u);
#pragma unroll
      for (int u = 0; u < kB; ++u) use(v[u], i + u);
    }
#pragma unroll 1
    for (; i < n; ++i) use(load(i), i);
  }

  // Chunk v's 8 values of a as bf16 pairs (the element math of prologue.cu).
  H3_DEVICE static uint4 modulate(const Chunk& v, float rstd) {
    float xf[8], wf[8], scf[8], shf[8];
    unpack_bf16x8(v.x, xf);
    unpack_bf16x8(v.w, wf);
    unpack_bf16x8(v.sc, scf);
    unpack_bf16x8(v.sh, shf);
    u32 o[4];
#pragma unroll
    for (int e = 0; e < 4; ++e) {  // (round_bf16x2: each half as round_bf16 rounds it)
      float n0 = (xf[2 * e] * rstd) * wf[2 * e], n1 = (xf[2 * e + 1] * rstd) * wf[2 * e + 1];
      float s0 = scf[2 * e] + 1.f, s1 = scf[2 * e + 1] + 1.f;
      round_bf16x2(n0, n1);
      round_bf16x2(s0, s1);
      o[e] = cvt_bf16x2(__fmaf_rn(n0, s0, shf[2 * e]), __fmaf_rn(n1, s1, shf[2 * e + 1]));
    }
    return make_uint4(o[0], o[1], o[2], o[3]);
  }

  // Row r by the calling warp.
  template <int kU, int kV>
  H3_DEVICE void row(int r) const {
    const int lane = threadIdx.x % 32;
    // bf16: lane l's chunk q at element 8 (l + 32 q) of the row; FP8: at byte 8 (l + 32 q)
    bf16_t* ar = static_cast<bf16_t*>(a) + static_cast<i64>(r) * kK + 8 * lane;
    u8* qr = static_cast<u8*>(a) + static_cast<i64>(r) * kK + 8 * lane;
    const i64 i = index_is_64 ? static_cast<const i64*>(index)[r] : static_cast<const int*>(index)[r];
    if (i < 0 || i >= rows) {  // an invalid index: the whole row 0 (no table address formed)
      if constexpr (kFp8) {  // a = 0: the codes 0, s = RN(1e-12 / 448) (prologue.cu's amax 0)
#pragma unroll 1
        for (int q = 0; q < kQ; ++q) *reinterpret_cast<uint2*>(qr + 256 * q) = make_uint2(0, 0);
        if (lane == 0) act_scale[r] = fp8_scale_from_amax(0.f);
      } else {
#pragma unroll 1
        for (int q = 0; q < kQ; ++q) st16(ar + 256 * q, make_uint4(0, 0, 0, 0));
      }
      count_row(r, lane == 0, [] { __syncwarp(); });
      return;
    }
    const bf16_t* xr = x + static_cast<i64>(r) * kK;
    // 1. Sum of squares (DRAM), in prologue.cu's order; lane j keeps virtual warp j's total.
    float tot = 0.f;
    batched<kU>(
        kJ,
        [&](int j) {
          const int t = 32 * j + lane;
          X2 v{};
          if (t < kT) {
            v.v[0] = ld16(xr + 16 * t);
            v.v[1] = ld16(xr + 16 * t + 8);
          }
          return v;
        },
        [&](const X2& v, int j) {
          float f[16];
          const float ss = warp_sum(sum_squares_bf16x16(v.v[0], v.v[1], f));
          if (lane == j) tot = ss;
        });
    const float rstd = rmsnorm_rstd(warp_sum(lane < kJ ? tot : 0.f), kK, eps);
    // 2. Normalize and modulate (x again from L2, the weight and the table rows L2 / L1 hits);
    // lane l's chunk q holds columns 8 (l + 32 q) ..
    const bf16_t* x8 = xr + 8 * lane;
    const bf16_t* w8 = w + 8 * lane;
    const bf16_t* sc8 = scale + i * table_stride + 8 * lane;
    const bf16_t* sh8 = shift + i * table_stride + 8 * lane;
    auto load = [&](int q) {
      return Chunk{ld16(x8 + 256 * q), ld16(w8 + 256 * q), ld16(sc8 + 256 * q),
                   ld16(sh8 + 256 * q)};
    };
    if constexpr (kFp8) {
      // 2. The row's amax (the bf16 magnitudes as u16 pairs, a NaN winning), then 3. each value
      // again and its code.
      u32 m2 = 0;
      batched<kV>(kQ, load,
                  [&](const Chunk& v, int) { m2 = bf16x8_absmax_u16x2(m2, modulate(v, rstd)); });
      const u32 m = __reduce_max_sync(0xffffffffu, max(m2 & 0xffffu, m2 >> 16));
      const float s = fp8_scale_from_amax(__uint_as_float(m << 16));
      const float rcp = __frcp_rn(s);
      batched<kV>(kQ, load, [&](const Chunk& v, int q) {
        *reinterpret_cast<uint2*>(qr + 256 * q) = fp8_codes_x8_bf16(modulate(v, rstd), s, rcp);
      });
      if (lane == 0) act_scale[r] = s;
    } else {
      batched<kV>(kQ, load, [&](const Chunk& v, int q) { st16(ar + 256 * q, modulate(v, rstd)); });
    }
    count_row(r, lane == 0, [] { __syncwarp(); });
  }

  H3_DEVICE void spare(int wp, int r0, u8*) const {
    spare_warp_rows(wp, r0, [&](int r, int) { row<kSpareU, kSpareV>(r); });
  }

  H3_DEVICE void consumers(int worker, int workers, int r0) const {
    for (int r = worker; r < r0; r += workers) row<kConsU, kConsV>(r);
  }
};

}  // namespace h3
