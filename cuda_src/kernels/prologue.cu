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
#include "h3/adaln.cuh"
#include "h3/numeric.cuh"
#include "h3/quant.cuh"
#include "h3/reduce.cuh"

namespace h3 {

// CTAs resident per SM (the launch bounds' minimum; the host sizes the persistent grid to match):
// 2 (67-69 registers) or 3 (55-56: a third row in flight per SM; the sm_90a default). Only sm_90a
// builds take 3: at its 56-register cap ptxas spills the sm_120a / sm_89 FP8 and NVFP4 kernels
// (16-40 bytes), so those builds keep 2 and the host never asks them for 3.
#ifndef H3_PROLOGUE_CTAS_PER_SM
#define H3_PROLOGUE_CTAS_PER_SM 2
#endif
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ != 900
#define H3_PROLOGUE_MIN_CTAS 2
#else
#define H3_PROLOGUE_MIN_CTAS H3_PROLOGUE_CTAS_PER_SM
#endif

enum PrologueOut : int { kOutBf16 = 0, kOutFp8 = 1, kOutNvfp4 = 2 };

template <int kK>
struct PrologueShape {
  static_assert(kK % 16 == 0, "K must be a multiple of 16");
  static constexpr int kBlocks = kK / 16;                 // 16-column chunks, one per thread
  static constexpr int kWarps = (kBlocks + 31) / 32;
  static constexpr int kThreads = kWarps * 32;
};

// The streamed operand of one row (x) and its table index, prefetched one row ahead.
struct PrologueRow {
  uint4 x[2];
  i64 idx;
};

template <int kK, typename IndexT>
H3_DEVICE PrologueRow load_x(const bf16_t* __restrict__ x, const IndexT* __restrict__ index, i64 m,
                             int k0, bool active) {
  PrologueRow r = {};
  r.idx = static_cast<i64>(index[m]);
  if (active) {
    const bf16_t* xr = x + m * kK + k0;
    r.x[0] = ld16_stream(xr);
    r.x[1] = ld16_stream(xr + 8);
  }
  return r;
}

// Persistent: CTA b handles rows b, b + gridDim.x, ... and loads x of row m + gridDim.x into
// registers while it reduces and stores row m, so DRAM never waits on the block reductions. The
// table rows (a few rows, L2-resident) are loaded at the top of each row's iteration, under the
// sum-of-squares reduction.
// a_out:  bf16 [M, K]; required for kOutBf16, optional (nullptr) otherwise.
// q_out:  e4m3 [M, K] (kOutFp8) or packed e2m1 [M, K/2] (kOutNvfp4).
// s_out:  fp32 [M] (kOutFp8) or ue4m3 [M, K/16] linear (kOutNvfp4).
// global_scale: fp32 [1] on the device (kOutNvfp4 only).
template <int kK, int kOut, typename IndexT>
__global__ void __launch_bounds__(PrologueShape<kK>::kThreads, H3_PROLOGUE_MIN_CTAS) prologue_smxx(
    const bf16_t* __restrict__ x, const bf16_t* __restrict__ w, const bf16_t* __restrict__ scale,
    const bf16_t* __restrict__ shift, i64 table_stride, i64 rows,
    const IndexT* __restrict__ index, float eps, i64 M, bf16_t* __restrict__ a_out,
    u8* __restrict__ q_out, void* __restrict__ s_out, const float* __restrict__ global_scale) {
  using Shape = PrologueShape<kK>;
  __shared__ float red[Shape::kWarps];
  const int t = threadIdx.x;
  const bool active = t < Shape::kBlocks;
  const int k0 = 16 * t;
  float g = 0.f;
  __shared__ float os_tab[kOut == kOutNvfp4 ? 128 : 1];
  if constexpr (kOut == kOutNvfp4) {
    g = *global_scale;
    nvfp4_os_table(os_tab, g);
    __syncthreads();
  }

  i64 m = blockIdx.x;
  if (m >= M) return;
  PrologueRow cur = load_x<kK>(x, index, m, k0, active);
  for (; m < M; m += gridDim.x) {
    // The engine GEMM after it is launched programmatically (launch.PDL): once every CTA is on
    // its last row, let it be scheduled, so that its launch and barrier setup overlap the last
    // rows (it waits for this grid's end before it reads a). Signalled as each CTA starts
    // (session 14, s14-d), the FP8 pre-attention's GEMM ran 2.5% slower at M = 4824 / 9648.
    if (m + gridDim.x >= M) griddep_launch_dependents();
    // 1. This row's table rows (for a valid index only), then prefetch the next row's x.
    const bool valid = cur.idx >= 0 && cur.idx < rows;
    uint4 sc[2] = {}, sh[2] = {}, wv[2] = {};
    if (active) {  // the norm weight (L1-resident), reloaded per row: 8 registers fewer
      wv[0] = ld16(w + k0);
      wv[1] = ld16(w + k0 + 8);
    }
    if (valid && active) {
      // NOTE: the guard: no table address is formed for an invalid index.
      const i64 off = cur.idx * table_stride + k0;
      sc[0] = ld16(scale + off);
      sc[1] = ld16(scale + off + 8);
      sh[0] = ld16(shift + off);
      sh[1] = ld16(shift + off + 8);
    }
    PrologueRow nxt = {};
    if (m + gridDim.x < M) nxt = load_x<kK>(x, index, m + gridDim.x, k0, active);

    // 2. Sum of squares in fp32 (per-thread sequential, then a fixed shuffle tree).
    float xf[16];
    const float ss = block_sum<Shape::kWarps>(sum_squares_bf16x16(cur.x[0], cur.x[1], xf), red);
    const float rstd = rmsnorm_rstd(ss, kK, eps);

    // 3. Normalize and modulate; an invalid index zeroes the whole row.
    float a[16];
    {
      float wf[16], scf[16], shf[16];
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
      const float amax = block_max<Shape::kWarps>(absmax_nan(0.f, a), red);
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
        const Nvfp4Block b = nvfp4_block_tab(a, g, os_tab);
        *reinterpret_cast<uint2*>(q_out + m * (kK / 2) + k0 / 2) = b.codes;
        static_cast<u8*>(s_out)[m * (kK / 16) + t] = b.sf;
      }
    }
    cur = nxt;
  }
}

}  // namespace h3
