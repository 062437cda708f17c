// Rows of the A operand written inside the GEMM launch that reads them (the single-launch forms:
// the FP8 out_proj's per-token quantization, out_proj.cu; the BF16 pre-attention's prologue,
// pre_attention.cu), published per 128-row tile through a counter that the engine's TMA producer
// waits on before the tile's first A load (the engine's producer hooks, h3/gemm_sm90.cuh).
// Memory order: writer: the row's global stores, fence.proxy.async (visible to TMA), the
// writers' barrier, then one release-add per row; reader: acquire-load of the counter,
// fence.proxy.async, then TMA.
#pragma once
#include "h3/common.cuh"

#ifdef H3_FUSED_PROBE
// Diagnostics of the single-launch forms (scripts/probe_fused.py builds out_proj.cu with
// -DH3_FUSED_PROBE): nanoseconds and counts summed over a launch. The script's variants add
// switches that exist for timing experiments only (never set by the ops; some drop ordering,
// so act_q may be read stale): H3_FUSED_NOSPARE (the consumers quantize every row first),
// H3_FUSED_IDLESPARE (the spare warps do nothing: only with H3_FUSED_NOPOLL, as the rows past
// the first round are then never published),
// H3_FUSED_NOPOLL / H3_FUSED_NOPFENCE (no per-tile counter poll / no proxy fence after it),
// H3_FUSED_NOFENCE (no per-row proxy fence), H3_FUSED_EVICT (the codes pass's loads
// evict-first), H3_FUSED_PREGS=N (the producer warpgroup's register budget), H3_FUSED_NOAPRIME
// (the NVFP4 rows' a' stores dropped: the engine reads an earlier call's a').
__device__ unsigned long long h3_probe[8];
#define H3_PROBE_NOW(t) asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t))
#define H3_PROBE_ADD(i, v) atomicAdd(&h3_probe[i], static_cast<unsigned long long>(v))
#define H3_PROBE_MAX(i, v) atomicMax(&h3_probe[i], static_cast<unsigned long long>(v))
#else
#define H3_PROBE_NOW(t)
#define H3_PROBE_ADD(i, v)
#define H3_PROBE_MAX(i, v)
#endif

namespace h3 {

// The ready counters: tile_rows[t] counts the published rows of 128-row tile t (zero at launch).
struct ReadyRows {
  u32* tile_rows;  // [ceil(M / 128)]
  int M;

  // The engine's before_a: wait until every row of the tile at m0 is published.
  H3_DEVICE void before_a(int m0) const {
    if (m0 >= M) return;  // a cluster peer's tile entirely past M: nothing to wait for
#ifdef H3_FUSED_NOPOLL
    return;
#endif
    const u32 need = static_cast<u32>(min(128, M - m0));
    const u32* flag = tile_rows + m0 / 128;
    [[maybe_unused]] u64 t0 = 0, t1 = 0;
    H3_PROBE_NOW(t0);
    for (int polls = 0;; ++polls) {
      u32 v;
      asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(flag) : "memory");
      if (v >= need) {
        H3_PROBE_NOW(t1);
        H3_PROBE_ADD(polls ? 0 : 2, t1 - t0);  // [0]: time waited, [2]: one poll's latency
        H3_PROBE_ADD(polls ? 1 : 3, 1);        // [1]: tiles that waited, [3]: tiles that did not
        break;
      }
      __nanosleep(64);
    }
#ifndef H3_FUSED_NOPFENCE
    asm volatile("fence.proxy.async.global;" ::: "memory");
#endif
  }

  // Row r's counter, after every writer's stores are visible to the async proxy. `leader`: the
  // one thread of the row's writers that counts; `sync`: the writers' barrier (a warp's
  // __syncwarp, or a staged form's barrier of its warps).
  template <class Sync>
  H3_DEVICE void count_row(int r, bool leader, const Sync& sync) const {
#ifndef H3_FUSED_NOFENCE
    asm volatile("fence.proxy.async.global;" ::: "memory");
#endif
    sync();
    if (leader) {
      __threadfence();
      asm volatile("red.release.gpu.global.add.u32 [%0], 1;" ::"l"(tile_rows + r / 128)
                   : "memory");
    }
  }

  // The spare producer warps' rows when each warp is a worker (warp wp = 1..3 of the producer
  // warpgroup): rows r0 + w, r0 + w + W, ... for worker w of W = 3 per CTA, in increasing order
  // across the grid, ahead of the tile order; row(r, next) writes and publishes row r (next:
  // the worker's row after it, which may be M or more).
  template <class Row>
  H3_DEVICE void spare_warp_rows(int wp, int r0, const Row& row) const {
    const int workers = gridDim.x * 3;
    [[maybe_unused]] u64 t0 = 0;
    [[maybe_unused]] int rows_done = 0;
    H3_PROBE_NOW(t0);
    for (int r = r0 + blockIdx.x * 3 + (wp - 1); r < M; r += workers) {
      row(r, r + workers);
      ++rows_done;
    }
    probe_spare(threadIdx.x % 32 == 0, t0, rows_done);  // (a worker: one warp)
  }

  // The spare workers' probe counters (H3_FUSED_PROBE), added by one thread per worker.
  H3_DEVICE static void probe_spare([[maybe_unused]] bool leader, [[maybe_unused]] u64 t0,
                                    [[maybe_unused]] int rows_done) {
    [[maybe_unused]] u64 t1 = 0;
    H3_PROBE_NOW(t1);
    if (leader) {
      H3_PROBE_ADD(4, t1 - t0);    // [4]: the workers' busy time
      H3_PROBE_ADD(5, rows_done);  // [5]: their rows
      H3_PROBE_MAX(6, t1 - t0);    // [6]: the longest
    }
  }
};

}  // namespace h3
