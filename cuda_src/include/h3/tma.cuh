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

// The same load, multicast: the box lands at the same shared-memory offset in every CTA of the
// cluster named in `cta_mask`, each completing the mbarrier at `bar`'s offset in its own CTA.
H3_DEVICE void tma_load_2d_multicast(void* dst, const TmaDesc* desc, int x, int y, u64* bar,
                                     u16 cta_mask) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
      ".multicast::cluster [%0], [%1, {%2, %3}], [%4], %5;" ::"r"(smem_addr(dst)),
      "l"(reinterpret_cast<u64>(desc)), "r"(x), "r"(y), "r"(smem_addr(bar)), "h"(cta_mask)
      : "memory");
}

// 1-D bulk copy of `bytes` (a multiple of 16; both addresses 16-byte aligned) from global memory
// into this CTA's shared memory, completing `bar`'s transaction count; no tensor map, and L1 is
// not involved (the data goes L2 -> shared memory).
H3_DEVICE void bulk_load(void* dst, const void* src, u32 bytes, u64* bar) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::
          "r"(smem_addr(dst)),
      "l"(src), "r"(bytes), "r"(smem_addr(bar))
      : "memory");
}

// --- TMA stores (shared -> global, bulk-group completion) ---

// Order this thread's generic-proxy shared-memory writes before later async-proxy (TMA) reads.
H3_DEVICE void fence_proxy_async_smem() {
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

// 2-D tile store of the box at `src` to (x = inner coordinate in elements, y = row); elements
// past the tensor's edges are not written.
H3_DEVICE void tma_store_2d(const TmaDesc* desc, const void* src, int x, int y) {
  asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%1, %2}], [%3];" ::"l"(
                   reinterpret_cast<u64>(desc)),
               "r"(x), "r"(y), "r"(smem_addr(src))
               : "memory");
}

// 3-D tile store (x innermost, then y, then z), clipped per dimension at the tensor's edges.
H3_DEVICE void tma_store_3d(const TmaDesc* desc, const void* src, int x, int y, int z) {
  asm volatile(
      "cp.async.bulk.tensor.3d.global.shared::cta.bulk_group [%0, {%1, %2, %3}], [%4];" ::"l"(
          reinterpret_cast<u64>(desc)),
      "r"(x), "r"(y), "r"(z), "r"(smem_addr(src))
      : "memory");
}

H3_DEVICE void bulk_commit() { asm volatile("cp.async.bulk.commit_group;" ::: "memory"); }

// Wait until every committed bulk store has finished reading its shared-memory source.
H3_DEVICE void bulk_wait_read() { asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory"); }

// Wait until every committed bulk store has completed (its writes are performed).
H3_DEVICE void bulk_wait_all() { asm volatile("cp.async.bulk.wait_group 0;" ::: "memory"); }

// Barrier over `threads` threads (a multiple of 32) on hardware barrier `id` (1..15; 0 is
// __syncthreads).
H3_DEVICE void named_barrier_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
}

// --- thread-block clusters (sm_90+) ---

H3_DEVICE u32 cluster_rank() {
  u32 r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}

// Barrier over every thread of every CTA in the cluster (release / acquire).
H3_DEVICE void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release;\n barrier.cluster.wait.acquire;" ::: "memory");
}

// Make initialised mbarriers visible to the other CTAs of the cluster (before cluster_sync).
H3_DEVICE void fence_barrier_init_cluster() {
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}

// Arrive once on the mbarrier at `bar`'s offset in CTA `rank` of the cluster.
// NOTE: default (CTA-scope) release semantics, as CUTLASS's ClusterBarrier: the arrival only says
// "this stage's shared memory has been read", it publishes no data. `.release.cluster` would put
// a GPU-wide MEMBAR in front of every arrival (seen in the SASS).
H3_DEVICE void mbar_arrive_cluster(u64* bar, u32 rank) {
  asm volatile(
      "{\n .reg .b32 ra;\n mapa.shared::cluster.u32 ra, %0, %1;\n"
      " mbarrier.arrive.shared::cluster.b64 _, [ra];\n}" ::"r"(smem_addr(bar)),
      "r"(rank)
      : "memory");
}

}  // namespace h3
