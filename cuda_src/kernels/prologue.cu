// The shared prologue of every MiniMax-H3 op (SPEC.md section 2): RMSNorm + indexed AdaLN,
// written as bf16, per-token FP8 (e4m3 codes + fp32 scale) or NVFP4 (packed e2m1 codes + linear
// ue4m3 block scales, global scale read on the device).
//
//   rstd = rsqrt(sum_k x_k^2 / K + eps)          fp32, fixed reduction order
//   n_k  = bf16((x_k * rstd) * w_k)
//   s1_k = bf16(scale[i, k] + 1)
//   a_k  = bf16(fma(n_k, s1_k, shift[i, k]))     i = index[m]; a = 0 when i is outside [0, rows)
//
// Layout: x [M, K] bf16 contiguous; w [K]; scale/shift tables [rows, K] with unit column stride
// and a shared row stride (elements, multiple of 8), 16-byte aligned (host-checked). One CTA per
// row at a time; each thread owns 8 consecutive columns (one 16-byte vector), two neighbouring
// lanes one NVFP4 block, so K must be a multiple of 16.
// The table row address is formed only for a valid index (device-side guard).
#include "h3/numeric.cuh"
#include "h3/quant.cuh"
#include "h3/reduce.cuh"

namespace h3 {

enum PrologueOut : int { kOutBf16 = 0, kOutFp8 = 1, kOutNvfp4 = 2 };

template <int kK>
struct PrologueShape {
  static_assert(kK % 16 == 0, "K must be a multiple of 16");
  static constexpr int kChunks = kK / 8;  // 8-column chunks, one per thread
  static constexpr int kWarps = (kChunks + 31) / 32;
  static constexpr int kThreads = kWarps * 32;
};

// The streamed operand of one row (x) and its table index, prefetched one row ahead.
struct PrologueRow {
  uint4 x;
  i64 idx;
};

template <int kK, typename IndexT>
H3_DEVICE PrologueRow load_x(const bf16_t* __restrict__ x, const IndexT* __restrict__ index, i64 m,
                             int k0, bool active) {
  PrologueRow r = {};
  r.idx = static_cast<i64>(index[m]);
  if (active) r.x = ld16_stream(x + m * kK + k0);
  return r;
}

// Persistent: CTA b handles rows b, b + gridDim.x, ... and loads x of row m + gridDim.x into
// registers while it reduces and stores row m, so DRAM never waits on the block reductions. The
// table rows (a few rows, L2-resident) are loaded at the top of each row's iteration, under the
// sum-of-squares reduction.
// NOTE: 8 columns per thread (not 16) doubles the warps per SM; the chain of dependent work per
// row (two reductions, rsqrt, divisions, encodes) is latency-bound, and more warps hide it.
// __maxnreg__(48) (not __launch_bounds__(672, 2), which caps at 40 and spills) keeps two CTAs
// of 21 warps resident per SM; the host launches 2 CTAs per SM.
// a_out:  bf16 [M, K]; required for kOutBf16, optional (nullptr) otherwise.
// q_out:  e4m3 [M, K] (kOutFp8) or packed e2m1 [M, K/2] (kOutNvfp4).
// s_out:  fp32 [M] (kOutFp8) or ue4m3 [M, K/16] linear (kOutNvfp4).
// global_scale: fp32 [1] on the device (kOutNvfp4 only).
template <int kK, int kOut, typename IndexT>
__global__ void __maxnreg__(48) prologue_smxx(
    const bf16_t* __restrict__ x, const bf16_t* __restrict__ w, const bf16_t* __restrict__ scale,
    const bf16_t* __restrict__ shift, i64 table_stride, i64 rows,
    const IndexT* __restrict__ index, float eps, i64 M, bf16_t* __restrict__ a_out,
    u8* __restrict__ q_out, void* __restrict__ s_out, const float* __restrict__ global_scale) {
  using Shape = PrologueShape<kK>;
  __shared__ float red[Shape::kWarps];
  const int t = threadIdx.x;
  const bool active = t < Shape::kChunks;
  const int k0 = 8 * t;
  const uint4 wv = active ? ld16(w + k0) : make_uint4(0, 0, 0, 0);
  float g = 0.f;
  if constexpr (kOut == kOutNvfp4) g = *global_scale;

  i64 m = blockIdx.x;
  if (m >= M) return;
  PrologueRow cur = load_x<kK>(x, index, m, k0, active);
  for (; m < M; m += gridDim.x) {
    // 1. This row's table rows (for a valid index only), then prefetch the next row's x.
    const bool valid = cur.idx >= 0 && cur.idx < rows;
    uint4 sc = {}, sh = {};
    if (valid && active) {
      // NOTE: the guard: no table address is formed for an invalid index.
      const i64 off = cur.idx * table_stride + k0;
      sc = ld16(scale + off);
      sh = ld16(shift + off);
    }
    PrologueRow nxt = {};
    if (m + gridDim.x < M) nxt = load_x<kK>(x, index, m + gridDim.x, k0, active);

    // 2. Sum of squares in fp32 (per-thread sequential, then a fixed shuffle tree).
    float xf[8];
    unpack_bf16x8(cur.x, xf);
    float ss = 0.f;
#pragma unroll
    for (int i = 0; i < 8; ++i) ss = fmaf(xf[i], xf[i], ss);
    ss = block_sum<Shape::kWarps>(ss, red);
    // NOTE: ss / K is an IEEE division (--prec-div=true); rsqrtf is the MUFU approximation, as
    // upstream. The host reference computes rstd in float64; the two differ by ~1 ulp of fp32.
    const float rstd = rsqrtf(__fdiv_rn(ss, static_cast<float>(kK)) + eps);

    // 3. Normalize and modulate; an invalid index zeroes the whole row.
    float a[8];
    {
      float wf[8], scf[8], shf[8];
      unpack_bf16x8(wv, wf);
      unpack_bf16x8(sc, scf);
      unpack_bf16x8(sh, shf);
#pragma unroll
      for (int i = 0; i < 8; ++i) {
        const float n = round_bf16((xf[i] * rstd) * wf[i]);
        const float s1 = round_bf16(scf[i] + 1.f);
        a[i] = valid ? round_bf16(__fmaf_rn(n, s1, shf[i])) : 0.f;
      }
    }

    // 4. Store.
    if (a_out != nullptr && active) {
      uint4 o;
      o.x = pack_bf16x2(f32_to_bf16(a[0]), f32_to_bf16(a[1]));
      o.y = pack_bf16x2(f32_to_bf16(a[2]), f32_to_bf16(a[3]));
      o.z = pack_bf16x2(f32_to_bf16(a[4]), f32_to_bf16(a[5]));
      o.w = pack_bf16x2(f32_to_bf16(a[6]), f32_to_bf16(a[7]));
      st16(a_out + m * kK + k0, o);
    }
    if constexpr (kOut == kOutFp8) {
      float amax = 0.f;
#pragma unroll
      for (int i = 0; i < 8; ++i) amax = fmaxf(amax, fabsf(a[i]));
      amax = block_max<Shape::kWarps>(amax, red);
      const float s = fp8_scale_from_amax(amax);
      const float rcp = __frcp_rn(s);
      if (active) *reinterpret_cast<uint2*>(q_out + m * kK + k0) = fp8_codes_x8(a, s, rcp);
      if (t == 0) static_cast<float*>(s_out)[m] = s;
    } else if constexpr (kOut == kOutNvfp4) {
      // The NVFP4 block of lanes 2j and 2j+1: amax over both halves, then each lane encodes its
      // 8 values; the even lane writes the scale byte.
      float bamax = 0.f;
#pragma unroll
      for (int i = 0; i < 8; ++i) bamax = fmaxf(bamax, fabsf(a[i]));
      bamax = fmaxf(bamax, __shfl_xor_sync(0xffffffffu, bamax, 1));
      const Nvfp4Scale bs = nvfp4_scale(bamax, g);
      if (active) {
        *reinterpret_cast<u32*>(q_out + m * (kK / 2) + k0 / 2) = nvfp4_codes_x8(a, bs.os);
        if ((t & 1) == 0) static_cast<u8*>(s_out)[m * (kK / 16) + t / 2] = bs.sf;
      }
    }
    cur = nxt;
  }
}

}  // namespace h3
