// A prototype (-DH3_PA_OFFLOAD, scripts/probe_engine.py --ab paoff; never the ops' build): the
// FP8 pre-attention's per-head Q/K math moved off the consumer warpgroups, onto the three spare
// warps of the producer warpgroup (the n192 pair kernels, two launches and the single launch;
// bf16 and e4m3 out modes).
//
// Why: the math is 7-8% of the FP8 op while the tensor cores wait (session 28, --ab panomath);
// run by other warps it should overlap the next tile's mainloop. Measured (session 29, H100):
// correct, but 16-44% slower than the default; the spare warps do not keep up (benchmarks/
// NOTES.md, session 29, and gpu_round.sh s30-a, which looks for why).
// * Consumers (EpiPreAttnPairOff): y = bf16((acc * act_scale) * w_scale), written as bf16 into
//   four 64 x 64 boxes per warpgroup (128B swizzle, the TMA store layout): the staging buffer's
//   two (s0, s1) and the vector area's two (v0, v1). First tile of a pair: head A -> s0 s1,
//   head B's first 64 columns -> v0. Second tile: head B's last 64 -> v1, head C -> s0 s1. Then
//   the warpgroup's leader publishes the job (row0, col0) and arrives on full[wg]; before
//   writing, it waits on free[wg] for the previous job.
// * Math group (PaOffMath::serve, warps 1-3 of the producer warpgroup, 40 registers): per job,
//   the heads it completes (first tile: A; second: C, then B) row by row, one row-head per warp
//   at a time: lane l < 24 holds dims 2l, 2l + 1 and their RoPE partners 2l + 48, 2l + 49; lanes
//   24-31 hold dims 96-127 four each (no rotation); a warp sum gives the row's sum of squares.
//   In place, then one thread issues the TMA stores and, once they have read the boxes, arrives
//   on free[wg].
// The same rounding points as h3/pre_attention.cuh (r = y, n = bf16((r * rstd) * g), the RoPE
// pair as fma(n_d, c, -(n_{d+48} s)) and fma(n_{d+48}, c, n_d s), one rounding each); only the
// sum of squares runs in another order (SPEC section 8 allows it).
#pragma once
#include "h3/copy.cuh"
#include "h3/norm_rows.cuh"
#include "h3/pre_attention_wg.cuh"

#ifndef H3_PA_OFF_ROWS
#define H3_PA_OFF_ROWS 2  // rows per step of a math warp (their loads and shuffles overlap)
#endif

namespace h3 {

// The hook area (ProducerSmem): the four barriers first (the engine initializes them, kBarriers),
// then one job slot per consumer warpgroup (the engine zeroes them).
struct PaOffArea {
  u64 full[2];   // warpgroup w's boxes hold its job's y (or the end: col0 < 0)
  u64 free_[2];  // the math group is done with warpgroup w's boxes (stored and read)
  struct Slot {
    u32 s;  // the warpgroup's staging (boxes s0, s1), a shared-memory address
    u32 v;  // its vector area (boxes v0, v1)
    int row0, col0, count;
    int mode;  // the single launch: this pair's form (1: offloaded; set at its first tile)
    int pad[2];
  } slot[2];
  // the single launch: 1 once the spare warps have written their rows and serve jobs; the
  // math group's next warpgroup (its lead thread's pick)
  int ready, pick, pad[2];
};

template <int kOut, bool kLive = false>  // kLive: the single launch's act_scale (WgYRowColT)
struct EpiPreAttnPairOff {
  EpiPreAttnQkv<kOut, WgYRowColT<kLive>> one;  // its math's M and its scaling policy
  static_assert(kOut == kPaOutBf16 || kOut == kPaOutE4m3, "bf16 and e4m3 out modes");
  static constexpr bool kPairN = true;
  static constexpr bool kHookSmem = true;
  static constexpr int kVecBytes = 16384;  // boxes v0, v1

  template <int kBN>
  H3_DEVICE void prefetch_vec(int, int, u8*) const {}

  template <int kAcc>
  H3_DEVICE void operator()(float (&d)[kAcc], int row0, int col0, u8* staging, int wg, u8* vec,
                            u8* hook) const {
    static_assert(kAcc == 96, "a 64 x 192 fragment");
    PaOffArea* ar = reinterpret_cast<PaOffArea*>(hook);
    PaOffArea::Slot& sl = ar->slot[wg - 1];
    const int tid = threadIdx.x % 128, lane = tid % 32, w = tid / 32;
    typename WgYRowColT<kLive>::Ops so;
    one.scale.load(so, row0, one.math.M);
    one.scale.template apply_groups<0, 24>(d, col0, so);
    if (tid == 0) {
      H3_EP_STAMP(fw0);
      if (sl.count > 0) mbar_wait(&ar->free_[wg - 1], (sl.count - 1) & 1);
      H3_EP_STAMP(fw1);
      H3_EP_ADD(12, fw1 - fw0);  // (probe builds: the consumers' waits for their boxes)
      H3_EP_ADD(13, 1);
      if constexpr (kLive) bulk_wait_read();  // the inline form's stores of earlier tiles
    }
    named_barrier_sync(wg, 128);
    const bool first = (col0 / 192) % 2 == 0;
    const u32 s = smem_addr(staging), v = smem_addr(vec);
#pragma unroll
    for (int b = 0; b < 3; ++b) {
      const u32 base =
          first ? (b == 2 ? v : s + 8192 * b) : (b == 0 ? v + 8192 : s + 8192 * (b - 1));
#pragma unroll
      for (int j = 0; j < 8; ++j)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const float* x = &d[4 * (8 * b + j) + 2 * h];
          sts_u32(staging_pair_addr(base, j, h, w, lane), cvt_bf16x2(x[0], x[1]));
        }
    }
    fence_proxy_async_smem();  // V heads go to their TMA stores as written here
    named_barrier_sync(wg, 128);
    if (tid == 0) {
      sl.s = s;
      sl.v = v;
      sl.row0 = row0;
      sl.col0 = col0;
      sl.count = sl.count + 1;
      mbar_arrive(&ar->full[wg - 1]);
    }
  }

  // After the warpgroup's last unit: the end marker (col0 = -1) for the math group, once it is
  // done with the last job (the slot is then free).
  static constexpr bool kFinish = true;
  H3_DEVICE void finish(int wg, u8* hook) const {
    PaOffArea* ar = reinterpret_cast<PaOffArea*>(hook);
    PaOffArea::Slot& sl = ar->slot[wg - 1];
    if (threadIdx.x % 128 == 0) {
      if (sl.count > 0) mbar_wait(&ar->free_[wg - 1], (sl.count - 1) & 1);
      sl.col0 = -1;
      sl.count = sl.count + 1;
      mbar_arrive(&ar->full[wg - 1]);
    }
  }
};

// The single launch (pre_attention_fp8_n192_fused_sm90 under -DH3_PA_OFFLOAD): until the spare
// warps have written their rows (ProNormRows) each pair runs the inline epilogue
// (EpiPreAttnPair); from the first pair that starts after they are done (PaOffArea::ready), the
// offload form. The form is chosen per pair at its first tile (head B's first half sits in the
// stash or in box v0) by the warpgroup's lead thread and shared through a barrier; finish()
// publishes the end (col0 = -1) so that the math group stops.
template <int kOut>
struct EpiPreAttnPairOffDyn {
  EpiPreAttnPair<kOut, true> inl;
  EpiPreAttnPairOff<kOut, true> off;
  static constexpr bool kPairN = true;
  static constexpr bool kHookSmem = true;
  static constexpr bool kFinish = true;
  static constexpr int kVecBytes = 16384;  // the stash, or boxes v0, v1

  template <int kBN>
  H3_DEVICE void prefetch_vec(int, int, u8*) const {}

  template <int kAcc>
  H3_DEVICE void operator()(float (&d)[kAcc], int row0, int col0, u8* staging, int wg, u8* vec,
                            u8* hook) const {
    PaOffArea* ar = reinterpret_cast<PaOffArea*>(hook);
    PaOffArea::Slot& sl = ar->slot[wg - 1];
    const int tid = threadIdx.x % 128;
    bool offload;
    if ((col0 / 192) % 2 == 0) {
      const bool ready = tid == 0 && *reinterpret_cast<volatile int*>(&ar->ready) != 0;
      // (through a shuffle: warp-uniform to ptxas, as the engine's tail flag)
      offload = __shfl_sync(0xffffffffu, named_barrier_or(wg, 128, ready), 0) != 0;
      if (tid == 0) sl.mode = offload;
    } else {
      // written by the lead thread at the pair's first tile, before that epilogue's barriers
      offload = __shfl_sync(0xffffffffu, sl.mode, 0) != 0;
    }
    if (offload) {
      off(d, row0, col0, staging, wg, vec, hook);
    } else {
      inl(d, row0, col0, staging, wg, vec);
    }
  }

  H3_DEVICE void finish(int wg, u8* hook) const { off.finish(wg, hook); }
};

template <int kOut>
struct PaOffMath {
  PreAttnMath math;
  const TmaDesc* desc[3];
  PaKindScalar scalar[3];  // e4m3: the kinds' descales
  static constexpr int kSmemBytes = sizeof(PaOffArea);
  static constexpr int kBarriers = 4;
  static_assert(sizeof(PaOffArea) % 16 == 0, "the hook area: a multiple of 16 bytes");

  H3_DEVICE void before_a(int) const {}
  H3_DEVICE void consumers(int, int, int) const {}

  // Rows r = w - 1, w + 2, ... of the 64-row head at columns hc (kind < 2) in boxes X (dims
  // 0-63) and X + 8192 (dims 64-127), two rows per step.
  // kMath = false (V heads, e4m3 out mode only): the values go to their codes unchanged. kOut 1:
  // each row's 128 codes overwrite the row's own 128 bytes of the first box (the e4m3 TMA box:
  // 128-byte rows, 128B swizzle), after the warp has read the whole row (the warp sum orders it).
  template <bool kMath = true, int kRows = H3_PA_OFF_ROWS>
  H3_DEVICE void head_rows(u32 X, int w, int row0, int hc, float os) const {
    const int lane = threadIdx.x % 32;
    const bool rot = lane < 24;
    const int dA = rot ? 2 * lane : 96 + 4 * (lane - 24);
    const int dB = rot ? 2 * lane + 48 : 98 + 4 * (lane - 24);
    const u32 offA = X + (dA / 64) * 8192 + (dA % 8) * 2;
    const u32 offB = X + (dB / 64) * 8192 + (dB % 8) * 2;
    const int cA = (dA % 64) / 8, cB = (dB % 64) / 8;
    const bf16_t* g = hc / kPaKindCols == 0 ? math.q_w : math.k_w;
    const u32 gA = *reinterpret_cast<const u32*>(g + dA);
    const u32 gB = *reinterpret_cast<const u32*>(g + dB);
    for (int r0 = w - 1; r0 < 64; r0 += 3 * kRows) {
      u32 aA[kRows], aB[kRows], wa[kRows], wb[kRows], cw[kRows], sw[kRows];
#pragma unroll
      for (int i = 0; i < kRows; ++i) {
        const int r = r0 + 3 * i;  // (r < 64 + 3: the second row of the last step may be past
                                   // the block; it is then skipped below)
        const int p = math.position(row0 + r);
        cw[i] = 0x3f803f80u;  // (1, 1): lanes 24-31 rotate by nothing (then selected away)
        sw[i] = 0u;
        if (kMath && rot && r < 64) {
          const bf16_t* csr = math.cs + static_cast<i64>(p) * 96 + dA;
          cw[i] = *reinterpret_cast<const u32*>(csr);
          sw[i] = *reinterpret_cast<const u32*>(csr + 48);
        }
        aA[i] = offA + r * 128 + ((cA ^ (r & 7)) << 4);
        aB[i] = offB + r * 128 + ((cB ^ (r & 7)) << 4);
        wa[i] = r < 64 ? lds_u32(aA[i]) : 0u;
        wb[i] = r < 64 ? lds_u32(aB[i]) : 0u;
      }
      float ss[kRows];
      if constexpr (kMath) {
#pragma unroll
        for (int i = 0; i < kRows; ++i) {
          const float a0 = __uint_as_float(wa[i] << 16), a1 = __uint_as_float(wa[i] & 0xffff0000u);
          const float b0 = __uint_as_float(wb[i] << 16), b1 = __uint_as_float(wb[i] & 0xffff0000u);
          ss[i] = __fmaf_rn(b1, b1, __fmaf_rn(b0, b0, __fmaf_rn(a1, a1, a0 * a0)));
        }
#pragma unroll
        for (int o = 16; o > 0; o /= 2)
#pragma unroll
          for (int i = 0; i < kRows; ++i) ss[i] += __shfl_xor_sync(0xffffffffu, ss[i], o);
      } else {
        __syncwarp();  // every lane's loads before any lane's codes overwrite the row
      }
#pragma unroll
      for (int i = 0; i < kRows; ++i) {
        const int r = r0 + 3 * i;
        // a / b: the final values of dims dA, dA + 1 / dB, dB + 1 (bf16-exact floats)
        float a[2] = {__uint_as_float(wa[i] << 16), __uint_as_float(wa[i] & 0xffff0000u)};
        float b[2] = {__uint_as_float(wb[i] << 16), __uint_as_float(wb[i] & 0xffff0000u)};
        if constexpr (kMath) {
          const float rstd = rsqrtf(ss[i] * (1.f / kPaHeadDim) + math.qk_eps);
          a[0] = (a[0] * rstd) * __uint_as_float(gA << 16);
          a[1] = (a[1] * rstd) * __uint_as_float(gA & 0xffff0000u);
          b[0] = (b[0] * rstd) * __uint_as_float(gB << 16);
          b[1] = (b[1] * rstd) * __uint_as_float(gB & 0xffff0000u);
          round_bf16x2(a[0], a[1]);
          round_bf16x2(b[0], b[1]);
          const float c[2] = {__uint_as_float(cw[i] << 16), __uint_as_float(cw[i] & 0xffff0000u)};
          const float sn[2] = {__uint_as_float(sw[i] << 16), __uint_as_float(sw[i] & 0xffff0000u)};
          float lo[2], hi[2];
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            lo[e] = __fmaf_rn(a[e], c[e], -(b[e] * sn[e]));
            hi[e] = __fmaf_rn(b[e], c[e], a[e] * sn[e]);
          }
          round_bf16x2(lo[0], lo[1]);
          round_bf16x2(hi[0], hi[1]);
#pragma unroll
          for (int e = 0; e < 2; ++e) {  // lanes 24-31 keep n (dims 96-127 pass through)
            a[e] = rot ? lo[e] : a[e];
            b[e] = rot ? hi[e] : b[e];
          }
        }
        if (r < 64) {
          if constexpr (kOut == kPaOutBf16) {
            sts_u32(aA[i], cvt_bf16x2(a[0], a[1]));
            sts_u32(aB[i], cvt_bf16x2(b[0], b[1]));
          } else {
            sts_u16(X + r * 128 + (((dA / 16) ^ (r & 7)) << 4) + dA % 16,
                    e4m3x2(a[0] * os, a[1] * os));
            sts_u16(X + r * 128 + (((dB / 16) ^ (r & 7)) << 4) + dB % 16,
                    e4m3x2(b[0] * os, b[1] * os));
          }
        }
      }
    }
  }

  // Warpgroup q's published job (its full barrier has completed): the heads it completes, their
  // TMA stores, then free[q] once the stores have read the boxes (issued by `issuer`).
  H3_DEVICE void job(PaOffArea* ar, int q, int w, bool issuer) const {
    const PaOffArea::Slot& sl = ar->slot[q];
    const int col0 = sl.col0, M = math.M;
    const bool first = (col0 / 192) % 2 == 0;
    // first tile: head A (s); second: head C (s), then head B (v)
    const int heads = first ? 1 : 2;
    // the job's RoPE rows into L1 first (identity positions, the FP8 op's: 64 rows x 192
    // bytes = 96 lines, one per math thread), so that the row loop's loads hit L1
    if ((first ? col0 : col0 - 64) / kPaKindCols < 2) {
      const i64 byte = static_cast<i64>(sl.row0) * 192 + 128 * (threadIdx.x - 32);
      if (byte / 192 < math.cs_rows && byte / 192 < M)
        asm volatile("prefetch.global.L1 [%0];" ::"l"(reinterpret_cast<const u8*>(math.cs) + byte));
    }
    for (int hh = 0; hh < heads; ++hh) {
      const int hc = first ? col0 : (hh == 0 ? col0 + 64 : col0 - 64);
      const int kind = hc / kPaKindCols;
      // e4m3: the kind's os = RN(1 / descale), as the default's store_fragment_e4m3
      const float os = kOut == kPaOutE4m3 ? __frcp_rn(pick3(scalar, kind).get()) : 0.f;
      if (kind < 2) {
        head_rows<true>(hh == 0 ? sl.s : sl.v, w, sl.row0, hc, os);
      } else if constexpr (kOut == kPaOutE4m3) {
        head_rows<false>(hh == 0 ? sl.s : sl.v, w, sl.row0, hc, os);  // V: codes only
      }
    }
    fence_proxy_async_smem();
    named_barrier_sync(3, 96);
    if (issuer) {
      for (int hh = 0; hh < heads; ++hh) {
        const int hc = first ? col0 : (hh == 0 ? col0 + 64 : col0 - 64);
        const int kind = hc / kPaKindCols, head = (hc % kPaKindCols) / kPaHeadDim;
        const u32 base = hh == 0 ? sl.s : sl.v;
        const TmaDesc* dk = pick3(desc, kind);
        if constexpr (kOut == kPaOutBf16) {
          tma_store_2d(dk, base, head * kPaHeadDim, sl.row0);
          tma_store_2d(dk, base + 8192, head * kPaHeadDim + 64, sl.row0);
        } else {  // the head's 128 codes per row, in the first box
          tma_store_2d(dk, base, head * kPaHeadDim, sl.row0);
        }
      }
      bulk_commit();
      bulk_wait_read();
      mbar_arrive(&ar->free_[q]);
    }
  }

  // warps w = 1..3 of the producer warpgroup (the two launches): serve every job until both
  // warpgroups' end markers (EpiPreAttnPairOff::finish)
  H3_DEVICE void spare(int w, int, u8* hook) const { serve(w, hook); }

  // Probe builds (-DH3_ENGINE_PROBE; the landing watcher's slots, unused with producer hooks):
  // [9] the math group's time in jobs (its lead thread's: through the stores' reads), [10] its
  // jobs, [11] its waits for the next job; the consumers add [12] their waits for free boxes and
  // [13] those waits' count.
  H3_DEVICE static void probe_add([[maybe_unused]] bool issuer, [[maybe_unused]] u64 busy,
                                  [[maybe_unused]] u64 idle, [[maybe_unused]] int jobs) {
#ifdef H3_ENGINE_PROBE
    if (issuer) {
      atomicAdd(&h3_engine_probe[9], static_cast<unsigned long long>(busy));
      atomicAdd(&h3_engine_probe[10], static_cast<unsigned long long>(jobs));
      atomicAdd(&h3_engine_probe[11], static_cast<unsigned long long>(idle));
    }
#endif
  }

  // Serve the two warpgroups' jobs as they come until both have published the end (in the
  // single launch after the rows, announcing `ready` first; there the counts differ, as each
  // warpgroup chooses the form per pair). The lead thread picks the next warpgroup and shares
  // it through the area.
  H3_DEVICE void serve(int w, u8* hook) const {
    PaOffArea* ar = reinterpret_cast<PaOffArea*>(hook);
    const bool issuer = w == 1 && threadIdx.x % 32 == 0;
    named_barrier_sync(3, 96);  // (the single launch: every spare warp's rows are written)
    if (issuer) *reinterpret_cast<volatile int*>(&ar->ready) = 1;
    int n0 = 0, n1 = 0;  // jobs taken per warpgroup (the full barriers' phases)
    bool end0 = false, end1 = false;
    [[maybe_unused]] u64 busy = 0, idle = 0;  // (probe builds)
    while (!(end0 && end1)) {
      H3_EP_STAMP(t0);
      if (issuer) {
        int pick = -1;
        while (pick < 0) {
          if (!end0 && mbar_test(&ar->full[0], n0 & 1)) {
            pick = 0;
          } else if (!end1 && mbar_test(&ar->full[1], n1 & 1)) {
            pick = 1;
          } else {
            __nanosleep(100);
          }
        }
        *reinterpret_cast<volatile int*>(&ar->pick) = pick;
      }
      named_barrier_sync(3, 96);
      const int q = *reinterpret_cast<volatile int*>(&ar->pick);
      const bool end = *reinterpret_cast<volatile int*>(&ar->slot[q].col0) < 0;
      if (q == 0) {
        ++n0;
        end0 = end0 || end;
      } else {
        ++n1;
        end1 = end1 || end;
      }
      H3_EP_STAMP(t1);
      if (!end) {
        job(ar, q, w, issuer);  // (its barrier also keeps the next pick behind every read)
      } else {
        named_barrier_sync(3, 96);
      }
      H3_EP_STAMP(t2);
      H3_EP_ACC(idle, t0, t1);
      H3_EP_ACC(busy, t1, t2);
    }
    if (issuer) bulk_wait_all();
    probe_add(issuer, busy, idle, n0 + n1 - 2);
  }
};

// The single launch's hooks: ProNormRows' rows (the consumer warps the first round's, the spare
// warps the rest), then the spare warps serve the offloaded epilogues (PaOffMath::serve).
template <int kOut>
struct PaOffRowsMath {
  ProNormRows<true> rows;
  PaOffMath<kOut> m;
  static constexpr int kSmemBytes = PaOffMath<kOut>::kSmemBytes;
  static constexpr int kBarriers = PaOffMath<kOut>::kBarriers;

  H3_DEVICE void before_a(int m0) const { rows.before_a(m0); }
  H3_DEVICE void consumers(int worker, int workers, int r0) const {
    rows.consumers(worker, workers, r0);
  }
  H3_DEVICE void spare(int w, int r0, u8* hook) const {
    rows.spare(w, r0, hook);
    m.serve(w, hook);
  }
};

}  // namespace h3
