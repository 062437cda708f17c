// Quantization recipes shared by every kernel (SPEC.md section 1).
#pragma once
#include "h3/numeric.cuh"

namespace h3 {

// fp32(1/6), the constant of the NVFP4 block-scale rule.
constexpr float kRcp6 = 0.16666667163372040f;
constexpr float kE4m3Max = 448.f;

// Per-token / per-channel FP8 scale from a row amax: s = max(amax, 1e-12) / 448 (IEEE division).
H3_DEVICE float fp8_scale_from_amax(float amax) { return __fdiv_rn(fmaxf(amax, 1e-12f), kE4m3Max); }

// 8 values -> 8 e4m3 codes of RN(v / s): the correctly rounded fp32 quotient (SPEC: a plain
// multiply by a reciprocal of s lands on the other side of an e4m3 tie for ~5 codes in 10,000).
// `rcp` must be the correctly rounded 1/s (__frcp_rn(s)).
// NOTE: Markstein's correction: with q0 = RN(v * rcp) within 1 ulp of v/s, the residual
// r = v - q0*s is exact in one fma and RN(q0 + r*rcp) is the correctly rounded quotient. Three
// instructions instead of a full IEEE division per element; the GPU tests check every code
// against formats.py's true division.
// NOTE: for v = -0 the correction returns +0 (r = +0, and +0 + -0 is +0 under RN), but the true
// quotient is -0 (e4m3 code 0x80, which SwiGLU's y produces); the sign is put back from v, which
// changes nothing else since s > 0.
H3_DEVICE float div_rn_markstein(float v, float s, float rcp) {
  const float q0 = v * rcp;
  const float r = __fmaf_rn(-q0, s, v);
  return copysignf(__fmaf_rn(r, rcp, q0), v);
}

// a / b correctly rounded, branch-free, for b >= 1 (SwiGLU's 1 + exp(-g)): the sequence of
// __fdiv_rn's fast path (approximate reciprocal, one Newton step, Markstein's correction; sign
// of a zero quotient from a, as above) without its per-division range check and slow-path call,
// whose divergence blocks serialized the FC1 epilogue (SASS: 48 FCHK / BSSY / CALL per tile
// fragment). `exact` is cleared when the inputs leave the range where that sequence is the
// correctly rounded quotient (a zero or 2^-100 <= |a| <= 2^100, 1 <= b <= 2^100: the quotient
// and every intermediate stay normal); the caller then divides those with __fdiv_rn.
H3_DEVICE float div_rn_ge1(float a, float b, bool& exact) {
  float y;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(b));
  y = __fmaf_rn(y, __fmaf_rn(-b, y, 1.f), y);
  const float q0 = __fmul_rn(a, y);
  const float r = __fmaf_rn(-b, q0, a);
  const float aa = fabsf(a);
  // NOTE: bitwise operators: short-circuit ones became a branch per division (SASS)
  exact &= (a == 0.f) | ((aa >= 0x1p-100f) & (aa <= 0x1p100f));
  exact &= b <= 0x1p100f;  // b >= 1 by the caller's contract; false for NaN
  return copysignf(__fmaf_rn(r, y, q0), a);
}

H3_DEVICE uint2 fp8_codes_x8(const float (&v)[8], float s, float rcp) {
  u32 w[4];
#pragma unroll
  for (int i = 0; i < 4; ++i)
    w[i] = e4m3x2(div_rn_markstein(v[2 * i], s, rcp), div_rn_markstein(v[2 * i + 1], s, rcp));
  return make_uint2(w[0] | (w[1] << 16), w[2] | (w[3] << 16));
}

// NVFP4 block scale from the block amax and the global scale g:
//   sf = ue4m3((bamax * fp32(1/6)) * g),  os = sf != 0 ? g / float(sf) : 0  (IEEE division).
struct Nvfp4Scale {
  u8 sf;
  float os;
};

H3_DEVICE Nvfp4Scale nvfp4_scale(float bamax, float g) {
  Nvfp4Scale r;
  r.sf = ue4m3((bamax * kRcp6) * g);
  r.os = r.sf ? __fdiv_rn(g, e4m3_to_f32(r.sf)) : 0.f;
  return r;
}

// 8 values -> 8 e2m1 codes of fp32(v * os), element 2j in the low nibble of byte j.
H3_DEVICE u32 nvfp4_codes_x8(const float (&v)[8], float os) {
  float t[8];
#pragma unroll
  for (int i = 0; i < 8; ++i) t[i] = v[i] * os;
  return e2m1x8(t);
}

// One NVFP4 block of 16 values: the 8 code bytes and the scale byte.
struct Nvfp4Block {
  uint2 codes;
  u8 sf;
};

H3_DEVICE Nvfp4Block nvfp4_block(const float (&v)[16], float g) {
  float bamax = 0.f;
#pragma unroll
  for (int i = 0; i < 16; ++i) bamax = fmaxf(bamax, fabsf(v[i]));
  const Nvfp4Scale sc = nvfp4_scale(bamax, g);
  Nvfp4Block b;
  b.sf = sc.sf;
  b.codes = make_uint2(nvfp4_codes_x8(*reinterpret_cast<const float(*)[8]>(&v[0]), sc.os),
                       nvfp4_codes_x8(*reinterpret_cast<const float(*)[8]>(&v[8]), sc.os));
  return b;
}

// The same block with os = g / float(sf) looked up in `os_tab` (128 entries, os_tab[0] = 0),
// built once per CTA by nvfp4_os_table: bit-identical, and no per-block IEEE division.
H3_DEVICE Nvfp4Block nvfp4_block_tab(const float (&v)[16], float g, const float* os_tab) {
  float bamax = 0.f;
#pragma unroll
  for (int i = 0; i < 16; ++i) bamax = fmaxf(bamax, fabsf(v[i]));
  Nvfp4Block b;
  b.sf = ue4m3((bamax * kRcp6) * g);
  const float os = os_tab[b.sf];
  b.codes = make_uint2(nvfp4_codes_x8(*reinterpret_cast<const float(*)[8]>(&v[0]), os),
                       nvfp4_codes_x8(*reinterpret_cast<const float(*)[8]>(&v[8]), os));
  return b;
}

// os_tab[c] = g / float(ue4m3 code c) (IEEE division), os_tab[0] = 0, written by the block's
// threads. The caller synchronizes before use.
H3_DEVICE void nvfp4_os_table(float* os_tab, float g) {
  for (int c = threadIdx.x; c < 128; c += blockDim.x)
    os_tab[c] = c ? __fdiv_rn(g, e4m3_to_f32(static_cast<u8>(c))) : 0.f;
}

// Byte offset of scale SF[r, c] in the 128x4 swizzled layout of a [R, C] scale matrix
// (C padded to C4 = ceil(C/4)*4 columns).
H3_DEVICE i64 sf_128x4_offset(i64 r, int c, int n_cols) {
  const int c4 = (n_cols + 3) / 4;
  return ((r / 128) * c4 + c / 4) * 512 + (r % 32) * 16 + ((r % 128) / 32) * 4 + c % 4;
}

}  // namespace h3
