// The pre-attention epilogue math shared by the pre-attention kernels (SPEC.md sections 3, 4):
// per row and head of Q and K, r = bf16(y), RMSNorm with the per-head weight, partial NeoX RoPE of
// dims [0, 96) from the (cache, position) pair; V untouched. Works in place on a consumer
// warpgroup's wgmma fragment (h3/gemm_sm90.cuh layout): a 128-column slice of the tile is one
// (kind, head) in engine column order [kind, head, dim].
#pragma once
#include "h3/common.cuh"
#include "h3/numeric.cuh"

namespace h3 {

constexpr int kPaHeads = 56, kPaHeadDim = 128, kPaKindCols = kPaHeads * kPaHeadDim;  // 7168

// The per-head math of the epilogue on a consumer warpgroup's fragment (wgmma layout), in place:
// Q/K RMSNorm + RoPE; V untouched (the store's bf16 conversion is its rounding).
struct PreAttnMath {
  const bf16_t* __restrict__ q_w;   // [128]
  const bf16_t* __restrict__ k_w;   // [128]
  const bf16_t* __restrict__ cs;    // [S, 96]
  const void* __restrict__ pos;     // int32 / int64 [M], or nullptr for p = m
  int pos_is_64, cs_rows, M, hp;
  float qk_eps;

  H3_DEVICE int position(int row) const {
    if (row >= M) return 0;
    i64 p = row;
    if (pos != nullptr)
      p = pos_is_64 ? static_cast<const i64*>(pos)[row] : static_cast<const int*>(pos)[row];
    // NOTE: clamped on the device (SPEC: positions outside [0, S) use the nearest row).
    return static_cast<int>(p < 0 ? 0 : (p >= cs_rows ? cs_rows - 1 : p));
  }

  template <int kAcc>
  H3_DEVICE void apply(float (&d)[kAcc], int row0, int col0) const {
    constexpr int kHeads = kAcc / 64;  // 128-column heads in the tile
    const int lane = threadIdx.x % 32, w = (threadIdx.x % 128) / 32, q4 = lane % 4;
    const int kind = col0 / kPaKindCols;
    if (kind < 2) {
      const bf16_t* g = kind == 0 ? q_w : k_w;
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const bf16_t* csr = cs + static_cast<i64>(position(row0 + 16 * w + lane / 4 + 8 * h)) * 96;
#pragma unroll
        for (int hd = 0; hd < kHeads; ++hd) {
          auto at = [&](int jj, int e) -> float& { return d[4 * (16 * hd + jj) + 2 * h + e]; };
          float ss = 0.f;
#pragma unroll
          for (int jj = 0; jj < 16; ++jj)
#pragma unroll
            for (int e = 0; e < 2; ++e) {
              const float r = round_bf16(at(jj, e));
              at(jj, e) = r;
              ss = __fmaf_rn(r, r, ss);
            }
          ss += __shfl_xor_sync(0xffffffffu, ss, 1);
          ss += __shfl_xor_sync(0xffffffffu, ss, 2);
          const float rstd = rsqrtf(ss * (1.f / kPaHeadDim) + qk_eps);
#pragma unroll
          for (int jj = 0; jj < 16; ++jj) {
            const u32 gw = *reinterpret_cast<const u32*>(g + 8 * jj + 2 * q4);
            at(jj, 0) = round_bf16((at(jj, 0) * rstd) * __uint_as_float(gw << 16));
            at(jj, 1) = round_bf16((at(jj, 1) * rstd) * __uint_as_float(gw & 0xffff0000u));
          }
#pragma unroll
          for (int jj = 0; jj < 6; ++jj) {
            const u32 cw = *reinterpret_cast<const u32*>(csr + 8 * jj + 2 * q4);
            const u32 sw = *reinterpret_cast<const u32*>(csr + 48 + 8 * jj + 2 * q4);
            const float c[2] = {__uint_as_float(cw << 16), __uint_as_float(cw & 0xffff0000u)};
            const float s[2] = {__uint_as_float(sw << 16), __uint_as_float(sw & 0xffff0000u)};
#pragma unroll
            for (int e = 0; e < 2; ++e) {
              const float lo = at(jj, e), hi = at(jj + 6, e);
              at(jj, e) = round_bf16(__fmaf_rn(lo, c[e], -(hi * s[e])));
              at(jj + 6, e) = round_bf16(__fmaf_rn(hi, c[e], lo * s[e]));
            }
          }
        }
      }
    }
  }
};

}  // namespace h3
