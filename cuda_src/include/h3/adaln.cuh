// The RMSNorm pieces of the shared prologue (SPEC.md section 2) that every kernel writing `a`
// must compute in the same order to give the same bits: prologue.cu, and the single launches
// that write it themselves (h3/norm_rows.cuh, ProNormRows: the BF16 and FP8 pre-attention, FC1).
#pragma once
#include "h3/common.cuh"
#include "h3/numeric.cuh"

namespace h3 {

// One prologue thread's 16 consecutive columns (two 16-byte bf16 chunks): their fp32 values into
// xf, and the sum of their squares in column order (the per-thread part of the row's sum, before
// the fixed warp / block trees).
H3_DEVICE float sum_squares_bf16x16(uint4 lo, uint4 hi, float (&xf)[16]) {
  unpack_bf16x8(lo, *reinterpret_cast<float(*)[8]>(&xf[0]));
  unpack_bf16x8(hi, *reinterpret_cast<float(*)[8]>(&xf[8]));
  float ss = 0.f;
#pragma unroll
  for (int i = 0; i < 16; ++i) ss = fmaf(xf[i], xf[i], ss);
  return ss;
}

// rstd = rsqrt(sum / K + eps). NOTE: sum / K is an IEEE division (--prec-div=true); rsqrtf is
// the MUFU approximation, as upstream. The host reference computes rstd in float64; the two
// differ by ~1 ulp of fp32.
H3_DEVICE float rmsnorm_rstd(float sum, int k, float eps) {
  return rsqrtf(__fdiv_rn(sum, static_cast<float>(k)) + eps);
}

}  // namespace h3
