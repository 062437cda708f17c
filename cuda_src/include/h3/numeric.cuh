// Scalar codecs: bf16, e4m3 (saturating), ue4m3, e2m1, nibble packing.
// Every encoder rounds to nearest even, exactly like formats.py on the host.
#pragma once
#include "h3/common.cuh"

namespace h3 {

// ---------------------------------------------------------------- bf16
H3_DEVICE float bf16_to_f32(bf16_t b) { return __uint_as_float(static_cast<u32>(b) << 16); }

H3_DEVICE bf16_t f32_to_bf16(float f) {
  bf16_t r;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(r) : "f"(f));
  return r;
}

// max(a, b), NaN when either is NaN (max.NaN.f32, sm_80+): the amax rule of formats.py, whose
// np.max keeps a NaN where fmaxf would drop it.
H3_DEVICE float fmax_nan(float a, float b) {
  float r;
  asm("max.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
  return r;
}

// max(m, |v[0]|, ..., |v[N-1]|) in that order through fmax_nan: a NaN anywhere gives NaN. The
// amax of every quantizer (per-row FP8, the NVFP4 blocks, the tensor amax).
template <int N>
H3_DEVICE float absmax_nan(float m, const float (&v)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) m = fmax_nan(m, fabsf(v[i]));
  return m;
}

// round an fp32 to the nearest bf16 and return it as fp32
H3_DEVICE float round_bf16(float f) { return bf16_to_f32(f32_to_bf16(f)); }

// Two floats -> packed bf16 pair (lo in the low half), each correctly rounded.
H3_DEVICE u32 cvt_bf16x2(float lo, float hi) {
  u32 p;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(p) : "f"(hi), "f"(lo));
  return p;
}

// round_bf16 of two values with one conversion (cvt_bf16x2 packs the pair; each half is
// rounded exactly as round_bf16 rounds it): 3 instructions per pair instead of 4.
H3_DEVICE void round_bf16x2(float& lo, float& hi) {
  const u32 p = cvt_bf16x2(lo, hi);
  lo = __uint_as_float(p << 16);
  hi = __uint_as_float(p & 0xffff0000u);
}

// bf16(a * b) per half of two packed bf16 pairs: one rounding of the exact product, which is the
// same as rounding the fp32 product (8-bit significands: exact in fp32 unless it underflows
// fp32's normal range). fma with a -0 addend keeps the sign of a zero product.
H3_DEVICE u32 mul_bf16x2(u32 a, u32 b) {
  u32 d;
  asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(0x80008000u));
  return d;
}

// bf16(a + b) per half of two packed bf16 pairs, as fma(b, 1, a): one rounding of the exact sum.
// That equals rounding the fp32 sum to bf16: the fp32 rounding of a sum of two bf16 values and
// then the bf16 one is innocuous double rounding (24 >= 2 x 8 + 1 significand bits), and a zero
// sum of opposite signs is +0 either way.
H3_DEVICE u32 add_bf16x2(u32 a, u32 b) {
  u32 d;
  asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(d) : "r"(b), "r"(0x3f803f80u), "r"(a));
  return d;
}

H3_DEVICE void unpack_bf16x8(uint4 v, float (&f)[8]) {
  const u32 w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    f[2 * i] = __uint_as_float(w[i] << 16);
    f[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
  }
}

H3_DEVICE u32 pack_bf16x2(bf16_t lo, bf16_t hi) {
  return static_cast<u32>(lo) | (static_cast<u32>(hi) << 16);
}

// ---------------------------------------------------------------- e4m3 / ue4m3
// e4m3 (float8_e4m3fn): RNE, out-of-range finite values saturate to +-448.
H3_DEVICE u32 e4m3x2(float lo, float hi) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  u16 r;
  // NOTE: the first source operand lands in the upper byte.
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(r) : "f"(hi), "f"(lo));
  return r;
#else
  // FP8 kernels are refused on older targets by the Python layer; this keeps them compiling.
  __trap();
  return 0;
#endif
}

H3_DEVICE u8 e4m3(float f) { return static_cast<u8>(e4m3x2(f, 0.f) & 0xff); }

// ue4m3 scale byte: e4m3 of a non-negative value with the sign bit cleared.
H3_DEVICE u8 ue4m3(float f) { return static_cast<u8>(e4m3(f) & 0x7f); }

// float8_e4m3fn -> fp32; 0x7f / 0xff are NaN (as ml_dtypes decodes them): a ue4m3 block scale of
// a block holding a NaN is 0x7f, and it must decode to NaN, not to 480, for the NaN to reach the
// block's values.
H3_DEVICE float e4m3_to_f32(u8 c) {
  const u32 e = (c >> 3) & 0xf, m = c & 7;
  // NOTE: subnormals are m * 2^-9; normals are built from the bits (bias 7 -> fp32 bias 127).
  const float mag = e ? __uint_as_float(((e + 120u) << 23) | (m << 20)) : static_cast<float>(m) * 0.001953125f;
  if ((c & 0x7f) == 0x7f) return __uint_as_float(0x7fffffffu);
  return (c & 0x80) ? -mag : mag;
}

// An e4m3 byte as a bf16 pair (the value in both halves): exact, through the f16 pair that
// cvt.rn.f16x2.e4m3x2 gives (every e4m3 value is an f16 value and a bf16 value); 0x7f / 0xff
// give NaN. The same value as cvt_bf16x2 of e4m3_to_f32, in three instructions.
// NOTE: with that form in the NVFP4 out_proj's single launch, ptxas kept gridDim.x in local
// memory across setmaxnreg in the n224 kernel (session 46); with this one nothing spills.
H3_DEVICE u32 e4m3_to_bf16x2(u8 c) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  u32 h2;
  const u16 cc = static_cast<u16>(c) * 0x101u;
  asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(h2) : "h"(cc));
  float lo;
  asm("cvt.f32.f16 %0, %1;" : "=f"(lo) : "h"(static_cast<u16>(h2 & 0xffffu)));
  return cvt_bf16x2(lo, lo);
#else
  __trap();
  return 0;
#endif
}

// ---------------------------------------------------------------- e2m1
// e2m1 magnitudes {0, .5, 1, 1.5, 2, 3, 4, 6}, code 0..7, sign in bit 3; RNE to the even code,
// saturating at 6. The grid has step 0.5 below 2 (codes 0..4), step 1 in [2, 4) (codes 4..6) and
// step 2 from 4 (codes 6..7), so code = base + RNE(|f| / step), clamped to 7. Every tie lands on
// an even code (0.25 -> 0, 0.75 -> 2, 1.25 -> 2, 1.75 -> 4, 2.5 -> 4, 3.5 -> 6, 5 -> 6).
// NOTE: RNE(|f| * (1/step)) is one fma with the 1.5 * 2^23 magic number (the product is exact, so
// there is a single rounding). The same code runs on every target, including sm_120a where
// cvt.rn.satfinite.e2m1x2 exists, so what the H200 tests is what SM120 runs.
H3_DEVICE u32 e2m1(float f) {
  const float a = fabsf(f);
  const bool lo = a < 2.f, mid = a < 4.f;
  const float inv_step = lo ? 2.f : (mid ? 1.f : 0.5f);
  const int base = lo ? 0 : (mid ? 2 : 4);
  const int q = __float_as_int(__fmaf_rn(a, inv_step, 12582912.f)) - 0x4B400000;
  const u32 code = static_cast<u32>(min(base + q, 7));
  return code | ((__float_as_uint(f) >> 28) & 0x8u);
}

// 8 values -> 8 nibbles, element 2j in the low nibble of byte j.
H3_DEVICE u32 e2m1x8(const float (&v)[8]) {
  u32 r = 0;
#pragma unroll
  for (int i = 0; i < 8; ++i) r |= e2m1(v[i]) << (4 * i);
  return r;
}

// Dequantize the two nibbles of byte t of `v` with scale `s`: a bf16 pair (low = even element).
H3_DEVICE u32 e2m1x2_scaled_bf16x2(u32 v, int t, float s) {
  const u32 byte = (v >> (8 * t)) & 0xffu;
  auto dec = [](u32 c) {
    // e2m1 magnitude: code 0..7 -> {0, .5, 1, 1.5, 2, 3, 4, 6}
    const u32 e = (c >> 1) & 3u, m = c & 1u;
    const float mag = e ? __uint_as_float(((e + 126u) << 23) | (m << 22)) : 0.5f * m;
    return (c & 8u) ? -mag : mag;
  };
  const float lo = dec(byte & 0xfu) * s, hi = dec(byte >> 4) * s;
  return pack_bf16x2(f32_to_bf16(lo), f32_to_bf16(hi));
}

// Eight e2m1 codes (code j in nibble j of v) times a bf16 scale given in both halves of s2: four
// bf16 pairs, word j holding values 2j (low half) and 2j + 1. The same bits as
// e2m1x2_scaled_bf16x2 with that scale in fp32, in ~2.5 instructions per value instead of ~10:
// the bf16 of each magnitude is looked up with byte permutes (codes 0..7 index the low and the
// high bytes of {0, .5, 1, 1.5, 2, 3, 4, 6}), the sign is each code's bit 3 moved to bit 7 of
// its high byte, and one fma per pair scales it. The product is exact (a 2-bit by 4-bit
// significand fits bf16's 8 bits, and e2m1 times e4m3 spans 2^-10 .. 2688), so the one rounding
// changes nothing; a NaN scale gives NaN, and code 8 times a finite scale gives -0.
// NOTE: a prmt selector nibble with bit 3 set replicates the selected byte's top bit, so the
// lookups take the codes with bit 3 cleared, and the sign bytes use exactly that mode: the
// top bit of byte j of v << 4 is code 2j's sign, of v code 2j + 1's.
H3_DEVICE uint4 e2m1x8_scaled_bf16x8(u32 v, u32 s2) {
  const u32 mag = v & 0x77777777u, v4 = v << 4;
  u32 w[4];
#pragma unroll
  for (int g = 0; g < 2; ++g) {  // codes 4g .. 4g + 3
    const u32 sel = mag >> (16 * g);
    u32 lo, hi, sg;
    asm("prmt.b32 %0, %1, %2, %3;" : "=r"(lo) : "r"(0xc0800000u), "r"(0xc0804000u), "r"(sel));
    asm("prmt.b32 %0, %1, %2, %3;" : "=r"(hi) : "r"(0x3f3f3f00u), "r"(0x40404040u), "r"(sel));
    asm("prmt.b32 %0, %1, %2, %3;" : "=r"(sg) : "r"(v4), "r"(v), "r"(g ? 0xfbeau : 0xd9c8u));
    hi |= sg & 0x80808080u;
    u32 p0, p1;
    asm("prmt.b32 %0, %1, %2, 0x5140;" : "=r"(p0) : "r"(lo), "r"(hi));
    asm("prmt.b32 %0, %1, %2, 0x7362;" : "=r"(p1) : "r"(lo), "r"(hi));
    w[2 * g] = mul_bf16x2(p0, s2);
    w[2 * g + 1] = mul_bf16x2(p1, s2);
  }
  return make_uint4(w[0], w[1], w[2], w[3]);
}

}  // namespace h3
