// Tensor-memory-accelerator (TMA) loads completing on an mbarrier (sm_90+).
// The tensor map (CUtensorMap, 128 bytes) is encoded on the host by the driver
// (h3cupy/core/tma.py) and passed by value as a __grid_constant__ kernel parameter.
// NOTE: every asm statement that touches shared memory carries a "memory" clobber.
#pragma once
#include "h3/common.cuh"
#include "h3/copy.cuh"

namespace h3 {

// Opaque 128-byte, 64-byte-aligned copy of a CUtensorMap (no toolkit header under NVRTC).
struct alignas(64) TmaDesc {
  u64 v[16];
};

H3_DEVICE void mbar_init(u64* bar, u32 count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_addr(bar)), "r"(count)
               : "memory");
}

// Make the initialised barrier visible to the async proxy (the TMA unit) before first use.
H3_DEVICE void fence_barrier_init() {
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

// Arrive once and expect `bytes` more bytes of transaction on this phase.
H3_DEVICE void mbar_arrive_expect_tx(u64* bar, u32 bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_addr(bar)),
               "r"(bytes)
               : "memory");
}

H3_DEVICE void mbar_arrive(u64* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smem_addr(bar)) : "memory");
}

// Spin until the phase with parity `parity` has completed.
H3_DEVICE void mbar_wait(u64* bar, u32 parity) {
  u32 done;
  do {
    asm volatile(
        "{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
        " selp.u32 %0, 1, 0, p;\n}"
        : "=r"(done)
        : "r"(smem_addr(bar)), "r"(parity)
        : "memory");
  } while (!done);
}

// 2-D tile load: box at (x = inner coordinate in elements, y = row) into `dst`, completing
// `bar`'s transaction count. Out-of-bounds elements are filled with zeros by the TMA unit.
H3_DEVICE void tma_load_2d(void* dst, const TmaDesc* desc, int x, int y, u64* bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%2, %3}], [%4];" ::"r"(smem_addr(dst)),
      "l"(reinterpret_cast<u64>(desc)), "r"(x), "r"(y), "r"(smem_addr(bar))
      : "memory");
}

}  // namespace h3
