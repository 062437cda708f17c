// One CTA, one TMA tile load: the box at (x0, y0) of a 2-D uint8 tensor described by `desc`
// lands in shared memory through cp.async.bulk.tensor + mbarrier, then is copied out to `out`
// ([box_rows][box_cols] bytes). A GPU test compares it with NumPy slicing (zeros past the edges),
// which checks the host-side tensor-map encoding (h3cupy/core/tma.py) and the barrier protocol
// the GEMM engine's producer warp is built on. Needs sm_90+.
// NOTE: the tensor map is passed by value (__grid_constant__): the kernel reads it in place in
// the parameter space, which is what cp.async.bulk.tensor requires of a parameter tensor map.
#include "h3/tma.cuh"

namespace h3 {

constexpr int kTmaProbeMaxBytes = 16384;

__global__ void __launch_bounds__(128) tma_probe_sm90(const __grid_constant__ TmaDesc desc, int x0,
                                                      int y0, int box_bytes, u8* __restrict__ out) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  __shared__ alignas(128) u8 tile[kTmaProbeMaxBytes];
  __shared__ alignas(8) u64 bar;
  if (threadIdx.x == 0) {
    mbar_init(&bar, 1);
    fence_barrier_init();
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    mbar_arrive_expect_tx(&bar, static_cast<u32>(box_bytes));
    tma_load_2d(tile, &desc, x0, y0, &bar);
  }
  mbar_wait(&bar, 0);
  for (int i = threadIdx.x; i < box_bytes; i += blockDim.x) out[i] = tile[i];
#else
  __trap();
#endif
}

}  // namespace h3
