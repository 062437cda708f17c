// Warp and block reductions with a fixed order (bitwise deterministic run to run).
#pragma once
#include "h3/common.cuh"

namespace h3 {

H3_DEVICE float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// The warp's max of an unsigned value in one redux.sync (sm_80+).
H3_DEVICE u32 warp_max_u32(u32 v) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("redux.sync.max.u32 %0, %0, 0xffffffff;" : "+r"(v));
  return v;
#else
  __trap();
  return 0;
#endif
}

// The warp's max; a NaN in any lane makes it NaN (fmax_nan: the amax rule of formats.py).
H3_DEVICE float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmax_nan(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Block-wide sum / max (NaN-propagating, as warp_max) for kWarps warps; every thread gets the
// result. `smem` holds kWarps floats; the call ends with a barrier so `smem` may be reused right
// after.
template <int kWarps>
H3_DEVICE float block_sum(float v, float* smem) {
  v = warp_sum(v);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) smem[warp] = v;
  __syncthreads();
  float t = lane < kWarps ? smem[lane] : 0.f;
  t = warp_sum(t);
  __syncthreads();
  return t;
}

template <int kWarps>
H3_DEVICE float block_max(float v, float* smem) {
  v = warp_max(v);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) smem[warp] = v;
  __syncthreads();
  float t = lane < kWarps ? smem[lane] : 0.f;
  t = warp_max(t);
  __syncthreads();
  return t;
}

}  // namespace h3
