// Device weight helpers (SPEC.md section 7): per-row FP8, NVFP4 with linear or 128x4-swizzled
// scales, tensor amax, the NVFP4 global scale, and row permutations.
// These prepare weights once; they favour simple, exact code over peak bandwidth.
#include "h3/numeric.cuh"
#include "h3/quant.cuh"
#include "h3/reduce.cuh"

namespace h3 {

constexpr int kQuantThreads = 256;

// Per-row FP8 of a bf16 [rows, K] matrix (K a multiple of 8): s = max(amax, 1e-12) / 448,
// codes e4m3(w / s) (true division, saturating); a row holding a NaN gets a NaN scale and NaN
// codes, as formats.py. One CTA per source row. Row r is written to
// row dst_row[r] of the outputs (identity when dst_row is null): the FC1 prepack.
__global__ void __launch_bounds__(kQuantThreads) quantize_rows_fp8_smxx(
    const bf16_t* __restrict__ w, int K, const i64* __restrict__ dst_row, u8* __restrict__ q,
    float* __restrict__ scale) {
  __shared__ float red[kQuantThreads / 32];
  griddep_launch_dependents();  // the FP8 GEMM after it (launch.PDL; see the prologue)
  const i64 r = blockIdx.x;
  const bf16_t* row = w + r * K;
  float amax = 0.f;
  for (int k = 8 * threadIdx.x; k < K; k += 8 * kQuantThreads) {
    float f[8];
    unpack_bf16x8(ld16(row + k), f);
    amax = absmax_nan(amax, f);
  }
  amax = block_max<kQuantThreads / 32>(amax, red);
  const float s = fp8_scale_from_amax(amax);
  const float rcp = __frcp_rn(s);
  const i64 d = dst_row ? dst_row[r] : r;
  for (int k = 8 * threadIdx.x; k < K; k += 8 * kQuantThreads) {
    float f[8];
    unpack_bf16x8(ld16(row + k), f);
    *reinterpret_cast<uint2*>(q + d * K + k) = fp8_codes_x8(f, s, rcp);
  }
  if (threadIdx.x == 0) scale[d] = s;
}

// max |x| over n bf16 values (n a multiple of 8) into *amax_bits (fp32 bits; the caller zeroes
// it first). Non-negative floats order like their bit patterns, so an integer atomicMax works;
// a NaN (max.NaN's 0x7fffffff) orders above every number, so the tensor's amax becomes NaN, as
// formats.py's np.max gives.
__global__ void __launch_bounds__(kQuantThreads) absmax_bf16_smxx(const bf16_t* __restrict__ x,
                                                                  i64 n, u32* __restrict__ amax_bits) {
  __shared__ float red[kQuantThreads / 32];
  float amax = 0.f;
  for (i64 i = 8 * (static_cast<i64>(blockIdx.x) * kQuantThreads + threadIdx.x); i < n;
       i += 8 * static_cast<i64>(gridDim.x) * kQuantThreads) {
    float f[8];
    unpack_bf16x8(ld16(x + i), f);
    amax = absmax_nan(amax, f);
  }
  amax = block_max<kQuantThreads / 32>(amax, red);
  if (threadIdx.x == 0) atomicMax(amax_bits, __float_as_uint(amax));
}

// g = 448 * 6 / max(amax, 1e-12) in fp32 (NaN for a NaN amax, as formats.py). amax comes from
// the device (amax_dev) or, when that is null, from the host value amax_host.
__global__ void nvfp4_global_scale_smxx(const float* __restrict__ amax_dev, float amax_host,
                                        float* __restrict__ g) {
  const float amax = amax_dev ? *amax_dev : amax_host;
  *g = __fdiv_rn(2688.f, fmax_nan(amax, kAmaxFloor));
}

// The NVFP4 codec launches' work split: a task is 1024 values (128 groups of 8) of a row of K
// values, one warp a task, lane l taking the groups g0 + 32 j (j = 0..3) of it. Calls
// body(r, g0) for every task of this warp, grid-strided.
template <class Body>
__device__ __forceinline__ void for_each_row_task(i64 rows, int K, Body body) {
  constexpr int kWarps = kQuantThreads / 32;
  const i64 chunks = (K / 8 + 127) / 128;
  const i64 tasks = rows * chunks, stride = static_cast<i64>(gridDim.x) * kWarps;
  for (i64 t = static_cast<i64>(blockIdx.x) * kWarps + threadIdx.x / 32; t < tasks; t += stride) {
    const i64 r = t / chunks;
    body(r, static_cast<int>(t - r * chunks) * 128 + static_cast<int>(threadIdx.x % 32));
  }
}

// NVFP4 quantization of a bf16 [rows, K] matrix (K a multiple of 16) with the global scale
// *g: packed codes [rows, K/2], scales linear [rows, K/16] or 128x4-swizzled (the caller zeroes a
// swizzled buffer first so that its padding bytes are 0). The dequantization launch's shape: one
// warp per 1024 values of a row (a task), lane l taking the 8-value groups l, l + 32, l + 64 and
// l + 96, all four 16-byte loads in flight before the first is used. A 16-value block is two
// adjacent lanes' groups (its amax by one shuffle), and os = g / float(sf) comes from a per-CTA
// table (nvfp4_scale_tab): the same bits as nvfp4_block.
// NOTE: one thread per block (two 16-byte loads at a 32-byte stride, a 64-bit division and an
// IEEE division per block) was the form before session 47. On an H100 it already moved 2.2-2.4
// TB/s: the out_proj activation at 4824 / 38592 rows in 40.6 / 298 us, this form 41.3 / 279 us;
// the swizzled weight 48.4 us, this form 51.8 (session 48, benchmarks/dequant.py).
__global__ void __launch_bounds__(kQuantThreads) fp4_quantize_smxx(
    const bf16_t* __restrict__ a, i64 rows, int K, const float* __restrict__ g_ptr,
    u8* __restrict__ q, u8* __restrict__ sf, int swizzled) {
  __shared__ float os_tab[128];
  const float g = *g_ptr;
  nvfp4_os_table(os_tab, g);
  __syncthreads();
  const int groups = K / 8, n_cols = K / 16;
  const bool even_lane = !(threadIdx.x & 1);
  for_each_row_task(rows, K, [&](i64 r, int g0) {
    uint4 v[4];
#pragma unroll
    for (int j = 0; j < 4; ++j)
      v[j] = g0 + 32 * j < groups ? ld16(a + r * K + 8 * (g0 + 32 * j)) : make_uint4(0, 0, 0, 0);
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      // groups is even, so a pair of lanes is wholly in or out of the row; the shuffle runs on
      // every lane, the out-of-row ones with zeros
      const int gi = g0 + 32 * j;
      float f[8];
      unpack_bf16x8(v[j], f);
      float m = absmax_nan(0.f, f);
      m = fmax_nan(m, __shfl_xor_sync(0xffffffffu, m, 1));
      const u8 s = nvfp4_sf(m, g);
      if (gi < groups) {  // (os_tab[s]: nvfp4_scale_tab's lookup, kept inside the branch)
        *reinterpret_cast<u32*>(q + r * (K / 2) + 4 * gi) = nvfp4_codes_x8(f, os_tab[s]);
        if (even_lane) sf[swizzled ? sf_128x4_offset(r, gi / 2, n_cols) : r * n_cols + gi / 2] = s;
      }
    }
  });
}

// NVFP4 -> bf16 without the global scale: out[r, k] = e2m1(code) * ue4m3(sf[r, k / 16]). Exact in
// bf16 (a 2-bit by 4-bit significand product), so a bf16 GEMM with fp32 accumulation over such
// operands forms the same products as the block-scaled MMA, alpha applied after: the Hopper NVFP4
// path. Scales linear [rows, K/16] or 128x4-swizzled (weights). One warp per 1024 values of a row
// (a task): lane l decodes the 8-value groups l, l + 32, l + 64 and l + 96 of the task, so every
// load and store instruction of the warp is contiguous, and all four groups' loads are in flight
// before the first is used.
// NOTE: one thread per 16-value block (one 8-byte load, two 16-byte stores at a 32-byte stride,
// a 64-bit division per block) moved ~1.9 TB/s on an H100: the out_proj weight's w' (5376 x 7168)
// in 51 us, 37 us this way (session 46).
__global__ void __launch_bounds__(kQuantThreads) nvfp4_dequant_bf16_smxx(
    const u8* __restrict__ q, const u8* __restrict__ sf, i64 rows, int K, int swizzled,
    bf16_t* __restrict__ out) {
  const int groups = K / 8, n_cols = K / 16;
  for_each_row_task(rows, K, [&](i64 r, int g0) {
    u32 codes[4];
    u8 s[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int g = g0 + 32 * j, c = g / 2;
      if (g < groups) {
        codes[j] = *reinterpret_cast<const u32*>(q + r * (K / 2) + 4 * g);
        s[j] = sf[swizzled ? sf_128x4_offset(r, c, n_cols) : r * n_cols + c];
      }
    }
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int g = g0 + 32 * j;
      if (g < groups)
        st16(out + r * K + 8 * g, e2m1x8_scaled_bf16x8(codes[j], e4m3_to_bf16x2(s[j])));
    }
  });
}

// dst[i, :] = src[src_row[i], :] for rows of `words` 32-bit words.
__global__ void __launch_bounds__(kQuantThreads) permute_rows_smxx(
    const u32* __restrict__ src, u32* __restrict__ dst, i64 words, const i64* __restrict__ src_row) {
  const i64 i = blockIdx.x;
  const u32* s = src + src_row[i] * words;
  u32* d = dst + i * words;
  for (i64 k = threadIdx.x; k < words; k += kQuantThreads) d[k] = s[k];
}

// Test probe of the FC1 epilogue's silu (quant.cuh silu_approx): for every bf16 bit pattern
// g = bits[i], silu(g) as the epilogue computes it, before its bf16 rounding.
__global__ void __launch_bounds__(kQuantThreads) swiglu_silu_probe_smxx(
    const bf16_t* __restrict__ bits, int n, float* silu) {
  const int i = blockIdx.x * kQuantThreads + threadIdx.x;
  if (i >= n) return;
  silu[i] = silu_approx(bf16_to_f32(bits[i]));
}

}  // namespace h3
