// Quantization recipes shared by every kernel (SPEC.md section 1).
#pragma once
#include "h3/numeric.cuh"

namespace h3 {

// fp32(1/6), the constant of the NVFP4 block-scale rule.
constexpr float kRcp6 = 0.16666667163372040f;
constexpr float kE4m3Max = 448.f;

constexpr float kAmaxFloor = 1e-12f;

// Per-token / per-channel FP8 scale from a row amax: s = max(amax, 1e-12) / 448 (IEEE division).
// A NaN amax (a row holding a NaN) stays NaN through the floor, so scale and codes are NaN, as
// formats.py gives (fmaxf would drop it).
H3_DEVICE float fp8_scale_from_amax(float amax) {
  return __fdiv_rn(fmax_nan(amax, kAmaxFloor), kE4m3Max);
}

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
H3_DEVICE float div_rn_markstein_unsigned_zero(float v, float s, float rcp) {
  const float q0 = v * rcp;
  const float r = __fmaf_rn(-q0, s, v);
  return __fmaf_rn(r, rcp, q0);
}
H3_DEVICE float div_rn_markstein(float v, float s, float rcp) {
  return copysignf(div_rn_markstein_unsigned_zero(v, s, rcp), v);
}

// silu(g) = g / (1 + exp(-g)) in fp32 from the approximate exp2 and reciprocal (MUFU.EX2, MUFU.RCP:
// a few fp32 ulps from the exact value); FC1 rounds it to bf16 next (SPEC.md section 8 bounds y
// by 1.6e-2 relative; tests/test_mlp_gpu.py checks every bf16 g). It replaced expf and a
// correctly rounded division (session 8: ~600 fewer instructions per FC1 tile, MLP -1 to -3%).
// Saturates cleanly: exp(-g) = inf gives -0 for g -> -inf, exp(-g) = 0 gives g; silu(-0) = -0.
H3_DEVICE float silu_approx(float g) {
  float e, r;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(e) : "f"(g * -1.4426950408889634f));
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(1.f + e));
  return g * r;
}

H3_DEVICE uint2 fp8_codes_x8(const float (&v)[8], float s, float rcp) {
  u32 w[4];
#pragma unroll
  for (int i = 0; i < 4; ++i)
    w[i] = e4m3x2(div_rn_markstein(v[2 * i], s, rcp), div_rn_markstein(v[2 * i + 1], s, rcp));
  return make_uint2(w[0] | (w[1] << 16), w[2] | (w[3] << 16));
}

// The running max of |x| over 8 bf16 values (v), as sign-cleared bits in two u16 lanes of m2:
// for non-NaN values the integer order of |bf16| bits is the order of the values, and a NaN's
// bits exceed every other value's (inf included), so a NaN wins. The amax is
// float(max(lo, hi) << 16) of the result. One max.u16x2 per word (sm_90+).
H3_DEVICE u32 bf16x8_absmax_u16x2(u32 m2, uint4 v) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  const u32 w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int e = 0; e < 4; ++e) asm("max.u16x2 %0, %0, %1;" : "+r"(m2) : "r"(w[e] & 0x7fff7fffu));
  return m2;
#else
  __trap();  // the single-launch quantizers that call it are sm_90a kernels
  return 0;
#endif
}

// 8 bf16 values (v) -> 8 e4m3 codes of RN(x / s), as fp8_codes_x8, with each code's sign taken
// from its bf16's sign bit (one PRMT + one LOP3 per four codes instead of a copysign each: the
// quotient keeps the sign except for x = -0, whose code becomes 0x80, the true quotient's; a NaN
// code keeps the element's sign, 0x7f or 0xff).
H3_DEVICE uint2 fp8_codes_x8_bf16(uint4 v, float s, float rcp) {
  float f[8];
  unpack_bf16x8(v, f);
  u32 c[4];
#pragma unroll
  for (int e = 0; e < 4; ++e)
    c[e] = e4m3x2(div_rn_markstein_unsigned_zero(f[2 * e], s, rcp),
                  div_rn_markstein_unsigned_zero(f[2 * e + 1], s, rcp));
  // byte j of each word: the sign byte of element j's bf16 (bytes 1, 3 of the first source
  // word, 1, 3 of the second)
  const u32 s0 = __byte_perm(v.x, v.y, 0x7531), s1 = __byte_perm(v.z, v.w, 0x7531);
  return make_uint2((c[0] | (c[1] << 16)) | (s0 & 0x80808080u),
                    (c[2] | (c[3] << 16)) | (s1 & 0x80808080u));
}

// NVFP4 block scale from the block amax and the global scale g:
//   sf = ue4m3((bamax * fp32(1/6)) * g),  os = sf != 0 ? g / float(sf) : 0  (IEEE division).
// A block holding a NaN has a NaN amax (fmax_nan, as np.max in formats.py), so sf is 0x7f (NaN)
// and every value of the block decodes to NaN; its codes are then unspecified.
struct Nvfp4Scale {
  u8 sf;
  float os;
};

H3_DEVICE u8 nvfp4_sf(float bamax, float g) { return ue4m3((bamax * kRcp6) * g); }

H3_DEVICE Nvfp4Scale nvfp4_scale(float bamax, float g) {
  Nvfp4Scale r;
  r.sf = nvfp4_sf(bamax, g);
  r.os = r.sf ? __fdiv_rn(g, e4m3_to_f32(r.sf)) : 0.f;
  return r;
}

// The same scale with os = g / float(sf) looked up in `os_tab` (128 entries, os_tab[0] = 0),
// built once per CTA by nvfp4_os_table: bit-identical, and no per-block IEEE division.
H3_DEVICE Nvfp4Scale nvfp4_scale_tab(float bamax, float g, const float* os_tab) {
  Nvfp4Scale r;
  r.sf = nvfp4_sf(bamax, g);
  r.os = os_tab[r.sf];
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
  const Nvfp4Scale sc = nvfp4_scale(absmax_nan(0.f, v), g);
  Nvfp4Block b;
  b.sf = sc.sf;
  b.codes = make_uint2(nvfp4_codes_x8(*reinterpret_cast<const float(*)[8]>(&v[0]), sc.os),
                       nvfp4_codes_x8(*reinterpret_cast<const float(*)[8]>(&v[8]), sc.os));
  return b;
}

// The same block through nvfp4_scale_tab.
H3_DEVICE Nvfp4Block nvfp4_block_tab(const float (&v)[16], float g, const float* os_tab) {
  const Nvfp4Scale sc = nvfp4_scale_tab(absmax_nan(0.f, v), g, os_tab);
  Nvfp4Block b;
  b.sf = sc.sf;
  b.codes = make_uint2(nvfp4_codes_x8(*reinterpret_cast<const float(*)[8]>(&v[0]), sc.os),
                       nvfp4_codes_x8(*reinterpret_cast<const float(*)[8]>(&v[8]), sc.os));
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
