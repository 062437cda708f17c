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
// row at a time, each thread owns 16 consecutive columns (one NVFP4 block), so K must be a
// multiple of 16.
// The table row address is formed only for a valid index (device-side guard).
#include "h3/numeric.cuh"
#include "h3/quant.cuh"
#include "h3/reduce.cuh"

namespace h3 {

enum PrologueOut : int { kOutBf16 = 0, kOutFp8 = 1, kOutNvfp4 = 2 };

template <int kK>
struct PrologueShape {
  static_assert(kK % 16 == 0, "K must be a multiple of 16");
  static constexpr int kBlocks = kK / 16;                 // 16-column chunks, one per thread
  static constexpr int kWarps = (kBlocks + 31) / 32;
  static constexpr int kThreads = kWarps * 32;
};

// One row's x in registers.
struct PrologueRow {
  uint4 x[2];
};

constexpr int kPrologueStages = 4;  // rows of x in flight per CTA (shared-memory ring)

// cp.async of 16 bytes global -> shared, bypassing L1 (x is read once).
H3_DEVICE void cp_async16(void* smem, const void* gmem) {
  const u32 s = static_cast<u32>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(s), "l"(gmem));
}
H3_DEVICE void cp_async_commit() { asm volatile("cp.async.commit_group;"); }
template <int kPending>
H3_DEVICE void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(kPending));
}

// Persistent: CTA b handles rows b, b + gridDim.x, ... Each thread streams its own 32 bytes of
// x for the next kPrologueStages - 1 rows into a private slot of a shared-memory ring with
// cp.async, so several rows per CTA are in flight while it reduces and stores the current one.
// NOTE: every thread reads back only what it copied itself, so the ring needs no barrier: the
// thread's own cp.async.wait_group is enough. The table rows (a few rows, L2-resident) are loaded
// at the top of each row's iteration, under the sum-of-squares reduction.
// a_out:  bf16 [M, K]; required for kOutBf16, optional (nullptr) otherwise.
// q_out:  e4m3 [M, K] (kOutFp8) or packed e2m1 [M, K/2] (kOutNvfp4).
// s_out:  fp32 [M] (kOutFp8) or ue4m3 [M, K/16] linear (kOutNvfp4).
// global_scale: fp32 [1] on the device (kOutNvfp4 only).
template <int kK, int kOut, typename IndexT>
__global__ void __launch_bounds__(PrologueShape<kK>::kThreads, 2) prologue_smxx(
    const bf16_t* __restrict__ x, const bf16_t* __restrict__ w, const bf16_t* __restrict__ scale,
    const bf16_t* __restrict__ shift, i64 table_stride, i64 rows,
    const IndexT* __restrict__ index, float eps, i64 M, bf16_t* __restrict__ a_out,
    u8* __restrict__ q_out, void* __restrict__ s_out, const float* __restrict__ global_scale) {
  using Shape = PrologueShape<kK>;
  __shared__ float red[Shape::kWarps];
  __shared__ uint4 ring[kPrologueStages][Shape::kThreads][2];
  const int t = threadIdx.x;
  const bool active = t < Shape::kBlocks;
  const int k0 = 16 * t;
  float g = 0.f;
  if constexpr (kOut == kOutNvfp4) g = *global_scale;

  const i64 step = gridDim.x;
  i64 m = blockIdx.x;
  if (m >= M) return;
  // Fill the ring with the first kPrologueStages - 1 rows (an empty group past the end keeps the
  // group count uniform).
#pragma unroll
  for (int s = 0; s < kPrologueStages - 1; ++s) {
    const i64 r = m + s * step;
    if (active && r < M) {
      cp_async16(&ring[s][t][0], x + r * kK + k0);
      cp_async16(&ring[s][t][1], x + r * kK + k0 + 8);
    }
    cp_async_commit();
  }
  i64 idx = static_cast<i64>(index[m]);
  for (int it = 0; m < M; m += step, ++it) {
    // 1. This row's table rows (for a valid index only) and the copy of the row
    // kPrologueStages - 1 ahead.
    const bool valid = idx >= 0 && idx < rows;
    uint4 sc[2] = {}, sh[2] = {};
    if (valid && active) {
      // NOTE: the guard: no table address is formed for an invalid index.
      const i64 off = idx * table_stride + k0;
      sc[0] = ld16(scale + off);
      sc[1] = ld16(scale + off + 8);
      sh[0] = ld16(shift + off);
      sh[1] = ld16(shift + off + 8);
    }
    {
      const i64 r = m + (kPrologueStages - 1) * step;
      const int slot = (it + kPrologueStages - 1) % kPrologueStages;
      if (active && r < M) {
        cp_async16(&ring[slot][t][0], x + r * kK + k0);
        cp_async16(&ring[slot][t][1], x + r * kK + k0 + 8);
      }
      cp_async_commit();
    }
    cp_async_wait<kPrologueStages - 1>();
    PrologueRow cur;
    cur.x[0] = ring[it % kPrologueStages][t][0];
    cur.x[1] = ring[it % kPrologueStages][t][1];

    // 2. Sum of squares in fp32 (per-thread sequential, then a fixed shuffle tree).
    float xf[16];
    unpack_bf16x8(cur.x[0], *reinterpret_cast<float(*)[8]>(&xf[0]));
    unpack_bf16x8(cur.x[1], *reinterpret_cast<float(*)[8]>(&xf[8]));
    float ss = 0.f;
#pragma unroll
    for (int i = 0; i < 16; ++i) ss = fmaf(xf[i], xf[i], ss);
    ss = block_sum<Shape::kWarps>(ss, red);
    // the next row's index, issued here so its load overlaps this row's normalize and stores
    const i64 idx_next = m + step < M ? static_cast<i64>(index[m + step]) : 0;
    // NOTE: ss / K is an IEEE division (--prec-div=true); rsqrtf is the MUFU approximation, as
    // upstream. The host reference computes rstd in float64; the two differ by ~1 ulp of fp32.
    const float rstd = rsqrtf(__fdiv_rn(ss, static_cast<float>(kK)) + eps);

    // 3. Normalize and modulate; an invalid index zeroes the whole row.
    float a[16];
    {
      float wf[16], scf[16], shf[16];
      // NOTE: the norm weight is re-read per row (an L1 hit) rather than held in 8 registers.
      uint4 wv[2] = {};
      if (active) {
        wv[0] = ld16(w + k0);
        wv[1] = ld16(w + k0 + 8);
      }
      unpack_bf16x8(wv[0], *reinterpret_cast<float(*)[8]>(&wf[0]));
      unpack_bf16x8(wv[1], *reinterpret_cast<float(*)[8]>(&wf[8]));
      unpack_bf16x8(sc[0], *reinterpret_cast<float(*)[8]>(&scf[0]));
      unpack_bf16x8(sc[1], *reinterpret_cast<float(*)[8]>(&scf[8]));
      unpack_bf16x8(sh[0], *reinterpret_cast<float(*)[8]>(&shf[0]));
      unpack_bf16x8(sh[1], *reinterpret_cast<float(*)[8]>(&shf[8]));
#pragma unroll
      for (int i = 0; i < 16; ++i) {
        const float n = round_bf16((xf[i] * rstd) * wf[i]);
        const float s1 = round_bf16(scf[i] + 1.f);
        a[i] = valid ? round_bf16(__fmaf_rn(n, s1, shf[i])) : 0.f;
      }
    }

    // 4. Store.
    if (a_out != nullptr && active) {
      uint4 o[2];
      u32* ow = reinterpret_cast<u32*>(o);
#pragma unroll
      for (int i = 0; i < 8; ++i)
        ow[i] = pack_bf16x2(f32_to_bf16(a[2 * i]), f32_to_bf16(a[2 * i + 1]));
      bf16_t* ar = a_out + m * kK + k0;
      st16(ar, o[0]);
      st16(ar + 8, o[1]);
    }
    if constexpr (kOut == kOutFp8) {
      float amax = 0.f;
#pragma unroll
      for (int i = 0; i < 16; ++i) amax = fmaxf(amax, fabsf(a[i]));
      amax = block_max<Shape::kWarps>(amax, red);
      const float s = fp8_scale_from_amax(amax);
      const float rcp = __frcp_rn(s);
      if (active) {
        const uint2 c0 = fp8_codes_x8(*reinterpret_cast<float(*)[8]>(&a[0]), s, rcp);
        const uint2 c1 = fp8_codes_x8(*reinterpret_cast<float(*)[8]>(&a[8]), s, rcp);
        st16(q_out + m * kK + k0, make_uint4(c0.x, c0.y, c1.x, c1.y));
      }
      if (t == 0) static_cast<float*>(s_out)[m] = s;
    } else if constexpr (kOut == kOutNvfp4) {
      if (active) {
        const Nvfp4Block b = nvfp4_block(a, g);
        *reinterpret_cast<uint2*>(q_out + m * (kK / 2) + k0 / 2) = b.codes;
        static_cast<u8*>(s_out)[m * (kK / 16) + t] = b.sf;
      }
    }
    idx = idx_next;
  }
}

}  // namespace h3
