// The sm_90a GEMM engine: C[M, N] = A[M, K] * B[N, K]^T with fp32 accumulation, persistent and
// warp-specialized, the epilogue a functor.
//
// * A and B are row-major (K-major) bf16 or e4m3, loaded by TMA (tensor maps encoded by
//   h3cupy/core/tma.py, 128-byte swizzle, boxes of 128 bytes x 128 rows for A and x kBN / kCluster
//   rows for B; rows past M or N read as zero) into a kStages-deep shared-memory ring.
// * 384 threads: warpgroup 0 is the producer (one thread issues the TMA loads; its register
//   budget is lowered to 40 with setmaxnreg), warpgroups 1 and 2 are consumers (232 registers),
//   each running m64 x kBN wgmma on its 64 rows of the 128 x kBN tile. kWG = 3 (tile N 128
//   only): 512 threads, three consumer warpgroups (160 registers) on 192 x 128 tiles, the A box
//   192 rows: fewer L2 bytes per FLOP than 128 x 128 tiles, with 128-column (one-head) fragments.
// * kSplitK (bf16 swap-AB at small M, kernels/gemm_swapab.cu; tile N 16 or 136 there): the
//   persistent loop walks (tile, k range) units and the epilogue gets the split index.
// * kCluster = 2: the two CTAs of a cluster compute vertically adjacent tiles (the same N-tile)
//   and share B: each loads half of the B tile and multicasts it to both, so a CTA reads
//   128 + kBN / 2 rows per k-tile from L2 instead of 128 + kBN (v1 was L2-bandwidth-bound,
//   benchmarks/NOTES.md). A stage is refilled only when the consumers of both CTAs have released
//   it: each consumer warpgroup arrives on the empty barrier of both CTAs.
// * Full barriers complete on the TMA transaction bytes; empty barriers take one arrival per
//   consumer warpgroup of the cluster once its wgmma reading the stage has completed.
// * Persistent grid: cluster c takes tile pairs c, c + clusters, ... in a grouped order
//   (kGroupM M-tile pairs per group, N-tiles inner) so that the tiles in flight share A and B
//   panels in L2. The producer runs ahead across tile boundaries, so the next tile's loads overlap
//   the current tile's epilogue.
// * kPromote (FP8): each 128-byte k-tile is accumulated into a fresh fragment and added to the
//   fp32 total on the CUDA cores, because Hopper's FP8 wgmma accumulates with ~14 significant
//   bits (DeepSeek-V3 report, 3.3.2). kPromote = 1: one fresh fragment, the warpgroup waits for
//   its k-tile before adding (two fragments, kBN <= 192). kPromote = 2: two fresh fragments used
//   alternately, so k-tile kt + 1 is in the tensor cores while k-tile kt is added (three
//   fragments, kBN <= 128). kPromote = 3 / 4: as 1, but a fresh fragment holds two / four
//   k-tiles (256- / 512-deep FP8 sums in the tensor core, 1/2 / 1/4 of mode 1's waits and adds;
//   two fragments, kBN <= 192).
//
// The epilogue functor receives each consumer warpgroup's fragment once per tile:
//   epi(d, row0, col0, staging, wg): d[kBN / 2] is the 64 x kBN block at rows row0.., columns
//   col0..; thread (warp w of the warpgroup, lane l) holds d[4j + r] at row
//   row0 + 16w + mma_c_row(l, r), column col0 + 8j + mma_c_col(l, r). Rows at or past M and
//   columns at or past N hold zeros and must not be stored. d may be modified in place. `staging`
//   is this warpgroup's 16 KiB, 1024-aligned shared-memory buffer, `wg` (1 or 2) names its
//   hardware barrier (store_fragment_bf16 below).
#pragma once
#include "h3/common.cuh"
#include "h3/mma_sm90.cuh"
#include "h3/mma_sync.cuh"
#include "h3/numeric.cuh"
#include "h3/tma.cuh"

namespace h3 {

// The FP8 promotion mode of the operators' kernels (pre-attention, out_proj, the MLP): one place
// to switch it (benchmarks/NOTES.md has the measurements behind the choice).
constexpr int kOpsFp8Promote = 3;

// H3_MEMBER_OR(Trait, member) defines Trait<T, kDefault>::value: T::member when T declares that
// static constexpr member, else kDefault (the options that epilogues and producer hooks may set).
#define H3_MEMBER_OR(Trait, member)                                       \
  template <class T, auto kDefault>                                       \
  struct Trait {                                                          \
    template <class U>                                                    \
    __host__ __device__ static constexpr auto test(decltype(&U::member)) { \
      return U::member;                                                   \
    }                                                                     \
    template <class U>                                                    \
    __host__ __device__ static constexpr auto test(...) {                 \
      return kDefault;                                                    \
    }                                                                     \
    static constexpr auto value = test<T>(nullptr);                       \
  };

// Epilogues may declare `static constexpr bool kPrefetch = true` and a member
//   template <int kBN> void prefetch(int row0, int col0, u8* staging, u64* bar) const
// which every consumer thread calls once per tile, right after the tile's first k-tile of
// wgmma is issued; it may start TMA loads of epilogue operands into the warpgroup's staging
// buffer (then 64 x kBN bf16: full width) completing on `bar`. The engine waits on `bar` before
// calling the epilogue, so the loads run under the mainloop instead of in the epilogue. With
// kVecBytes (below) the engine passes the vector area as a fifth argument: cp.async copies into
// it there are waited for by the epilogue's vec_wait (operands that become valid only once the
// tile's first k-tile has landed, e.g. the single-launch out_proj's activation scales).
H3_MEMBER_OR(EpiPrefetches, kPrefetch)

// Epilogues may declare `static constexpr int kVecBytes = B` (a multiple of 16) and a member
//   template <int kBN> void prefetch_vec(int row0, int col0, u8* vec) const
// which every consumer thread calls once per unit, before its mainloop (issued inside it, with
// the fragments live, it spilled the single-launch out_proj's loop counter): it copies the tile's
// per-row and per-column operands (scales, gate indices) into the warpgroup's B bytes of shared
// memory `vec` with cp.async, so the epilogue reads them from shared memory instead of waiting on
// global loads while the tensor cores idle. The engine then calls the epilogue with `vec` as a
// sixth argument; the epilogue waits for its copies (cp.async.wait_all and a warpgroup barrier)
// and reads `vec` only before its last warpgroup barrier (the next unit's copies overwrite it).
// Session 10: the FP8 epilogues went from 2.2 / 5.0 us to 1.3 / 3.8 us per tile (plain / gated
// residual), and the kernels' times did not move: the mainloop grew by as much (NOTES.md).
H3_MEMBER_OR(EpiVecBytes, kVecBytes)

// prefetch_vec's copy of one fp32 vector: dst[i] = src[i0 + i] for i < kCount, spread over the
// warpgroup's 128 threads; zeros where i0 + i >= limit; with kOnesIfNull, 1.0 when src is null
// (an optional scale).
template <int kCount, bool kOnesIfNull = false>
H3_DEVICE void vec_copy_f32(float* dst, const float* src, int i0, int limit) {
  const int tid = threadIdx.x % 128;
  auto one = [&](int i) {
    const int j = i0 + i;
    if (kOnesIfNull && src == nullptr) {
      dst[i] = 1.f;
    } else {
      cp_async4(dst + i, src + (j < limit ? j : 0), j < limit ? 4 : 0);
    }
  };
  if constexpr (kCount <= 128) {
    if (tid < kCount) one(tid);
  } else {
#pragma unroll
    for (int i = tid; i < kCount; i += 128) one(i);
  }
}

// The epilogue's side of prefetch_vec: its own copies landed, then every thread's (a warpgroup
// barrier on the warpgroup's hardware barrier `wg`).
H3_DEVICE void vec_wait(int wg) {
  cp_async_wait_all();
  named_barrier_sync(wg, 128);
}
// A diagnostic build, never the ops': -DH3_NO_EPI_VEC gives every kernel its epilogue without the
// vectors (H3_EPI_VEC(n) is then 0), for scripts/probe_engine.py --ab's A/B in one run.
#ifdef H3_NO_EPI_VEC
#define H3_EPI_VEC(n) 0
#else
#define H3_EPI_VEC(n) (n)
#endif
// `static constexpr bool kFullStaging = true`: the whole 64 x kBN block per warpgroup in the
// staging buffer (as prefetching epilogues get), stored in one pass (no wait for the previous
// pass's TMA store to read the buffer in the middle of the epilogue).
H3_MEMBER_OR(EpiFullStaging, kFullStaging)

// `static constexpr int kStagingBoxes = 1`: the epilogue stores through one 8 KiB box per
// warpgroup (64-column passes) instead of the default two (kStagingBoxes above).
H3_MEMBER_OR(EpiStagingBoxes, kStagingBoxes)

// `static constexpr bool kPairN = true`: each CTA runs N-tiles in pairs, (m, 2j) then (m, 2j + 1)
// back to back (the tile order is over those pairs; the column-tile count must be even), so an
// epilogue can carry state from the first tile of a pair to the second through its vector area
// (the FP8 pre-attention's 192-column tiles: a head straddles the pair's two tiles). Cooperative
// schedule, no split-K. With the tail split (kTail, single CTAs), the last round's pairs run in
// k-ranges of both tiles, and one warpgroup runs both of a pair's epilogues (gemm_sm90_body's
// pair_iter). In clusters of two (no tail split) both CTAs run the same pairs, on vertically
// adjacent M-tiles, and multicast each weight tile between them.
H3_MEMBER_OR(EpiPairN, kPairN)

// 8 KiB boxes of epilogue staging per consumer warpgroup (without full staging): 2, stored in
// passes of 128 columns. A diagnostic build for kernels/gemm_wgmma.cu only (the pre-attention
// epilogues assume 128-column passes): -DH3_STAGING_8K gives one box, 64-column passes, and the
// ring the 8 KiB per warpgroup (the FP8 192-column tiles then get 5 stages instead of 4).
#ifdef H3_STAGING_8K
constexpr int kStagingBoxes = 1;
#else
constexpr int kStagingBoxes = 2;
#endif
constexpr int kPassCols = 64 * kStagingBoxes;

template <int kFmt, int kBN, int kPromote, int kCluster, bool kFullStaging = false, int kWG = 2,
          int kVecBytes = 0, int kBoxes = kStagingBoxes, int kHookBytes = 0>
struct Sm90GemmCfg {
  static_assert(kBN == 128 || kBN == 192 || kBN == 224 || kBN == 256 ||
                    (kFmt == 0 && kPromote == 0 && (kBN == 16 || kBN == 136)),
                "tile N must be 128, 192, 224 or 256 (bf16 also 16 or 136: swap-AB, small M)");
  static_assert(kPromote == 0 ||
                    ((kPromote == 1 || kPromote == 3 || kPromote == 4) && kBN <= 224) ||
                    (kPromote == 2 && kBN <= 128),
                "FP8 promotion: two fragments need tile N <= 192, three tile N <= 128");
  static_assert(kCluster == 1 || kCluster == 2, "cluster size 1 or 2");
  static_assert(kWG == 2 || (kWG == 3 && (kBN == 128 || (kBN == 192 && kPromote == 0))),
                "three consumer warpgroups: 192 x 128 tiles, or unpromoted 192 x 192 tiles");
  static_assert(kBoxes == 1 || kBoxes == 2, "one or two 8 KiB staging boxes per warpgroup");
  static constexpr int kBM = 64 * kWG;  // each consumer warpgroup owns 64 rows
  static constexpr int kBKBytes = 128;  // one 128B swizzle row: 64 bf16 or 128 e4m3
  static constexpr int kABytes = kBM * kBKBytes;
  static constexpr int kBBytes = kBN * kBKBytes;
  static constexpr int kBSliceRows = kBN / kCluster;  // B rows this CTA loads (and multicasts)
  static constexpr int kStageBytes = kABytes + kBBytes;
  // Epilogue staging: per consumer warpgroup two 64 x 64 bf16 boxes (128B-swizzled, 8 KiB each)
  // that the TMA store drains while the next tile's mainloop runs.
  // With kFullStaging (prefetching epilogues) each warpgroup's buffer holds its whole 64 x kBN
  // bf16 block, so a prefetched operand tile and the output share it.
  // kBoxes: the epilogue's boxes per warpgroup (EpiStagingBoxes; one box leaves the 192 x 192
  // bf16 tiles' ring four stages instead of three).
  static constexpr int kStagingBytes =
      kWG * (kFullStaging && 64 * kBN * 2 > kBoxes * 8192 ? 64 * kBN * 2 : kBoxes * 8192);
  static_assert(kVecBytes % 16 == 0, "epilogue vectors: a multiple of 16 bytes per warpgroup");
  static constexpr int kVecTotal = kWG * kVecBytes;  // after the staging buffers
  static constexpr int kSmemLimit = 232448;  // sm_90 opt-in maximum per block
  // kHookBytes: the producer hooks' own area after the barriers (ProducerSmem below)
  static_assert(kHookBytes % 16 == 0, "producer hooks' area: a multiple of 16 bytes");
  static constexpr int kRingBudget =
      kSmemLimit - 1024 - kStagingBytes - kVecTotal - 256 - kHookBytes;
  static constexpr int kStages = kRingBudget / kStageBytes > 6 ? 6 : kRingBudget / kStageBytes;
  // full[S], empty[S], the two ping-pong turn barriers and the two epilogue-prefetch barriers
  static constexpr int kSmemBytes = kStages * kStageBytes + kStagingBytes + kVecTotal +
                                    (2 * kStages + 4) * 8 + kHookBytes + 1024;
  static constexpr int kElemsPerRow = kFmt == 0 ? 64 : 128;
  static constexpr int kStepBytes = 32;  // one wgmma k-step: k16 bf16 or k32 e4m3
  static constexpr int kAcc = kBN / 2;   // fp32 fragment registers per thread
  static constexpr int kThreads = 128 * (kWG + 1);
  // Register budgets after setmaxnreg: two 112-register fragments (promoted n224) need 240 per
  // consumer thread, which leaves the producer 24; three consumer warpgroups get 160 each (two
  // 64-register n128 fragments).
  // NOTE: setmaxnreg moves registers within the CTA's launch allocation (the per-thread count of
  // __launch_bounds__(kThreads, 1), a multiple of 8, times kThreads: 3 x 168 per 128 threads
  // here), not the SM's 64 Ki: an increase the decreases do not cover waits forever (a 64 / 224
  // split hung the 384-thread kernels, 2026-12-01). Consumers at 224 instead of 232 also measured
  // 4.6% slower on the FP8 n192 out_proj kernel (benchmarks/NOTES.md, session 7).
  static constexpr int kConsumerRegs = kWG == 3 ? 160 : kPromote != 0 && kBN == 224 ? 240 : 232;
  static constexpr int kProducerRegs = kWG == 3 ? 32 : kPromote != 0 && kBN == 224 ? 24 : 40;
  // M-tiles (clusters: tile pairs) per group. Single CTAs grouped by 16 or 32 M-tiles measured
  // within +-2% of 8 (NOTES.md, session 11). Session 12 measured the DRAM bytes (ncu): FP8 QKV at
  // M = 38592 on single CTAs reads 8.9 GB with 8, 4.2 with 16 (cuBLAS 3.3), and a K-dependent
  // group (an ~11 MiB A panel) halved FP8 QKV / FC1 DRAM reads, yet ran level or 0.2-3.5% slower
  // in graph replays and level in energy per call: DRAM traffic is not what the engine's extra
  // energy goes to. H3_GROUP_M: a diagnostic build's other value (probe_engine.py --ab,
  // ncu_traffic.py group=G).
#ifdef H3_GROUP_M
  static constexpr int kGroupM = H3_GROUP_M;
#else
  static constexpr int kGroupM = 8;
#endif
  static_assert(128 * kProducerRegs + 128 * kWG * kConsumerRegs <=
                    (65536 / kThreads) / 8 * 8 * kThreads,
                "setmaxnreg budgets must fit the CTA's launch allocation");
};

// Diagnostics (scripts/probe_engine.py builds a module with -DH3_ENGINE_PROBE; never set by the
// ops): each cooperative consumer warpgroup's leader adds, per unit, globaltimer nanoseconds to
// h3_engine_probe: [0] the mainloop (from the unit's start to its last wgmma retired and
// promoted), [1] the wait for the epilogue's prefetched operand, [2] the epilogue (the tail
// split's partial sums included), [3] units run, [4] epilogues run, [5] the warpgroup's whole
// loop (setmaxnreg to its last store's completion), [6] the consumers' waits for full stages
// (operands not yet landed: the feed is behind), [7] the TMA producer's waits for empty stages
// (the consumers are behind), [8] the part of [6] in each unit's first kStages k-tiles (the
// ring's refill across the tile boundary against the steady state). In kernels without producer
// hooks, lane 0 of the producer's warp 1 watches every stage land and adds: [9] nanoseconds from
// each load's issue to its stage's completion, [10] loads, [11] / [12] / [13] loads that took
// over 1 / 2 / 4 us, [14] the latencies of the loads that consumer warpgroup 1 was already
// waiting for when they landed, [15] their count.
#ifdef H3_ENGINE_PROBE
extern "C" {  // C linkage: the host finds it by this name (cupy's get_global)
__device__ unsigned long long h3_engine_probe[16];
}
#define H3_EP_STAMP(t) \
  u64 t;               \
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t))
#define H3_EP_ADD(i, v) \
  if (threadIdx.x % 128 == 0) atomicAdd(&h3_engine_probe[i], static_cast<unsigned long long>(v))
#define H3_EP_DECL(v) u64 v = 0
#define H3_EP_ACC(v, t0, t1) v += (t1) - (t0)
#define H3_EP_ACC_IF(c, v, t0, t1) \
  if (c) v += (t1) - (t0)
#else
#define H3_EP_STAMP(t)
#define H3_EP_ADD(i, v)
#define H3_EP_DECL(v)
#define H3_EP_ACC(v, t0, t1)
#define H3_EP_ACC_IF(c, v, t0, t1)
#endif

// Grouped (L2-friendly) order of the output tiles (or tile pairs).
// H3_FIRST_GROUP_M=G0 (a diagnostic build, scripts/probe_fused.py): the first group holds G0
// M-tiles and the rest `group` each, so that the single-launch out_proj's first round of tiles
// reads fewer rows (132 tiles of 28 columns need 5 M-tiles, not 8).
struct TileOrder {
  int num_m, num_n, group;
  H3_DEVICE int count() const { return num_m * num_n; }
  // unit t's group: its first M-tile, its M-tile count and t's index inside it
  H3_DEVICE void group_of(int t, int& first, int& gm, int& local) const {
#ifdef H3_FIRST_GROUP_M
    const int g0 = min(num_m, H3_FIRST_GROUP_M);
    if (t < g0 * num_n) {
      first = 0;
      gm = g0;
      local = t;
      return;
    }
    const int t2 = t - g0 * num_n;
    first = g0 + (t2 / (group * num_n)) * group;
    gm = min(num_m - first, group);
    local = t2 - (first - g0) * num_n;
#else
    first = (t / (group * num_n)) * group;
    gm = min(num_m - first, group);
    local = t - first * num_n;
#endif
  }
  H3_DEVICE void tile(int t, int& mt, int& nt) const {
    int first, gm, local;
    group_of(t, first, gm, local);
    mt = first + local % gm;
    nt = local / gm;
  }
  // One past the highest M-tile (pair) index among units 0..units-1 (units >= 1): within a group
  // the M index cycles fastest, so the last unit's group is the highest one touched, and it
  // touches all of that group's M-tiles once its local index reaches gm - 1.
  H3_DEVICE int m_end(int units) const {
    int first, gm, local;
    group_of(min(units, count()) - 1, first, gm, local);
    return first + min(gm - 1, local) + 1;
  }
};

// Producer hooks (the default does nothing): `before_a(m0)` runs in the producer thread before the
// first A load of each tile (rows m0..m0+kBM-1); `spare(w, r0, smem)` in warps w = 1..3 of the
// producer warpgroup (which otherwise idle), concurrently with everything else; `consumers(worker,
// workers, r0)` in every consumer warp of the grid (worker 0..workers-1) before its first tile.
// r0 is the number of A rows that the grid's first round of tiles reads (rows 0..r0-1, at most
// M): work the first round waits for can go to the consumer warps, which are idle until then.
// A hook type may declare `static constexpr int kProducerRegs` (a multiple of 8) to move the
// register split: the producer warpgroup gets that budget, the consumers the rest of the launch
// allocation (scripts/probe_fused.py's register experiment; no kernel's default).
// A hook type may declare `static constexpr int kSmemBytes` (a multiple of 16, at least 16): the
// engine then reserves that much shared memory after its barriers (the ring gets the rest), hands
// it to `spare` as a third argument, and initializes its first 8 bytes as an mbarrier with an
// arrival count of 1 before any role starts (the spare warps' bulk copies complete on it).
struct NoProducerHooks {
  H3_DEVICE void before_a(int) const {}
  H3_DEVICE void spare(int, int, u8*) const {}
  H3_DEVICE void consumers(int, int, int) const {}
};

H3_MEMBER_OR(ProducerRegs, kProducerRegs)
H3_MEMBER_OR(ProducerSmem, kSmemBytes)

template <class A, class B>
struct H3SameType {
  static constexpr bool value = false;
};
template <class A>
struct H3SameType<A, A> {
  static constexpr bool value = true;
};

// Split-K of the last partial round (kTail): when the tile count is not a multiple of the grid's
// clusters, the R tiles left for the last round would run alone on R clusters while the others
// idle. With `splits` = S >= 2, each of them runs as S units over consecutive k-ranges
// ([s K / S, (s + 1) K / S)) on S clusters. Every such unit's consumer warpgroup writes its fp32
// fragment to `part`, counts itself on its counter, and the last of the S to arrive sums the S
// partials in split order (bitwise the same whichever arrives last) and runs the epilogue; it also
// resets the counter to zero for the next launch. No unit waits for another (no co-residency
// needed). The host picks S (1: off) and sizes the workspace: part holds
// min(clusters, R * S) x kCluster x kWG x 64 x kBN floats, count R x kCluster x kWG words, zero
// before the launch (the host memsets them; each tile's last arrival also resets its own).
struct TailSplit {
  float* part;
  u32* count;
  int splits;
};

// Named barriers: 0 the CTA's, 1..3 each consumer warpgroup's own (epilogue stores, tail
// arrivals), 8 the spare producer warps' (out_proj.cu).

// bar.red.or over the `threads` threads of named barrier `id`: every one of them gets the OR of
// their predicates (a barrier that also broadcasts one thread's decision).
H3_DEVICE bool named_barrier_or(int id, int threads, bool pred) {
  u32 r;
  asm volatile(
      "{\n .reg .pred p, q;\n setp.ne.u32 q, %1, 0;\n bar.red.or.pred p, %2, %3, q;\n"
      " selp.u32 %0, 1, 0, p;\n}"
      : "=r"(r)
      : "r"(static_cast<u32>(pred)), "r"(id), "r"(threads)
      : "memory");
  return r != 0;
}

H3_DEVICE void st_cg_f2(float* p, float a, float b) {
  asm volatile("st.global.cg.v2.f32 [%0], {%1, %2};" ::"l"(p), "f"(a), "f"(b) : "memory");
}

H3_DEVICE float2 ld_cg_f2(const float* p) {
  float2 v;
  asm volatile("ld.global.cg.v2.f32 {%0, %1}, [%2];" : "=f"(v.x), "=f"(v.y) : "l"(p) : "memory");
  return v;
}

template <int kFmt, int kBN, int kPromote, int kCluster, class Epi, bool kPingPong = false,
          class Pro = NoProducerHooks, int kWG = 2, bool kSplitK = false, bool kTail = false>
H3_DEVICE void gemm_sm90_body(const TmaDesc& desc_a, const TmaDesc& desc_b, int M, int N,
                              int k_bytes, const Epi& epi, const Pro& pro = Pro{},
                              int splits = 1, const TailSplit& tail = TailSplit{nullptr, nullptr, 1}) {
  static_assert(!kPingPong || (kPromote == 0 && kBN <= 128),
                "ping-pong: one warpgroup holds a whole 128 x kBN tile (kBN <= 128, no promotion)");
  constexpr bool kPf = EpiPrefetches<Epi, false>::value;
  constexpr int kVec = EpiVecBytes<Epi, 0>::value;
  constexpr bool kPair = EpiPairN<Epi, false>::value;
  static_assert(!kPair || ((kCluster == 1 || !kTail) && !kPingPong && !kSplitK),
                "N-tile pairs: cooperative schedule, no split-K; clusters without the tail split");
  static_assert(kVec == 0 || (!kPingPong && !kSplitK), "epilogue vectors: cooperative, no split-K");
  static_assert(!kPf || !kPingPong, "epilogue prefetch: cooperative schedule only");
  static_assert(!kPingPong || kWG == 2, "ping-pong: two consumer warpgroups");
  // kSplitK: unit u of the persistent loop is tile u / splits, k-tiles [s k / splits,
  // (s + 1) k / splits) of it (s = u % splits), and the epilogue is called with s as a sixth
  // argument (it writes an fp32 partial; a second kernel sums the partials in split order).
  static_assert(!kSplitK || (kCluster == 1 && !kPingPong && kPromote == 0),
                "split-K: single CTAs, cooperative schedule, no promotion");
  static_assert(!kTail || (!kSplitK && !kPingPong), "tail split: cooperative schedule, no split-K");
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  constexpr int kHook = ProducerSmem<Pro, 0>::value;
  using Cfg = Sm90GemmCfg<kFmt, kBN, kPromote, kCluster,
                          kPf || EpiFullStaging<Epi, false>::value, kWG, kVec,
                          EpiStagingBoxes<Epi, kStagingBoxes>::value, kHook>;
  constexpr int kLaunchRegs = (65536 / Cfg::kThreads) / 8 * 8;  // see Sm90GemmCfg's NOTE
  constexpr int kProducerRegs = ProducerRegs<Pro, Cfg::kProducerRegs>::value;
  constexpr int kConsumerRegs =
      kProducerRegs == Cfg::kProducerRegs
          ? Cfg::kConsumerRegs
          : ((kLaunchRegs * Cfg::kThreads - 128 * kProducerRegs) / (128 * kWG)) / 8 * 8;
  static_assert(kProducerRegs % 8 == 0 && kProducerRegs >= 24, "setmaxnreg: a multiple of 8");
  static_assert(128 * kProducerRegs + 128 * kWG * kConsumerRegs <= kLaunchRegs * Cfg::kThreads,
                "setmaxnreg budgets must fit the CTA's launch allocation");
  constexpr int S = Cfg::kStages;
  extern __shared__ u8 smem_raw[];
  require_dynamic_smem(Cfg::kSmemBytes);
  // NOTE: 128B-swizzled TMA tiles and wgmma descriptors need 1024-byte aligned tile bases. The
  // offset is the same in every CTA of a kernel, as multicast needs.
  u8* smem = reinterpret_cast<u8*>((reinterpret_cast<u64>(smem_raw) + 1023) & ~u64(1023));
  u8* staging = smem + S * Cfg::kStageBytes;
  u8* vec_all = staging + Cfg::kStagingBytes;  // kVec bytes per consumer warpgroup
  u64* full = reinterpret_cast<u64*>(vec_all + Cfg::kVecTotal);
  u64* empty = full + S;
  u64* turn = empty + S;  // ping-pong: turn[w - 1] lets warpgroup w start its next mainloop
  u64* pf = turn + 2;     // epilogue prefetch: pf[w - 1] completes warpgroup w's operand tile
  // the producer hooks' area (kHook bytes, 16-byte aligned: every area above is a multiple of 16)
  u8* hook_smem = reinterpret_cast<u8*>(pf + 2);
#ifdef H3_ENGINE_PROBE
  // per stage: when its last load was issued, and when consumer warpgroup 1 began to wait for it
  __shared__ u64 ep_issue[8], ep_wait[8];
  constexpr bool kObserve = H3SameType<Pro, NoProducerHooks>::value;
#endif
  // The warpgroup index through a shuffle: ptxas then knows it is warp-uniform, so the role
  // branches below do not make the consumers' code divergent to it (loop counters, stage
  // addresses and wgmma descriptors stay in uniform registers instead of vector registers moved
  // by R2UR before each wgmma).
#ifndef H3_WG_DIVERGENT
  const int wg = __shfl_sync(0xffffffffu, threadIdx.x / 128, 0);
#else  // (diagnostic: the form before session 20, every role's code divergent to ptxas)
  const int wg = threadIdx.x / 128;
#endif
  const int k_tiles = k_bytes / Cfg::kBKBytes;
  const u32 rank = kCluster > 1 ? cluster_rank() : 0;
  const int cluster_id = blockIdx.x / kCluster, clusters = gridDim.x / kCluster;
  // The tile order, formed where each use needs it from an opaque copy of M: one value of it
  // live across setmaxnreg is what ptxas spilled in the 192-row FP8 kernel with the tail split.
  auto order = [&]() {
    int m = M;
    asm volatile("" : "+r"(m));
    const int num_m = (m + Cfg::kBM - 1) / Cfg::kBM;
    const int num_n = (N + kBN - 1) / kBN;
    return TileOrder{(num_m + kCluster - 1) / kCluster, kPair ? num_n / 2 : num_n, Cfg::kGroupM};
  };
  // The A rows that the first round of tiles reads (the hooks' r0); formed where each role uses
  // it (a value held across setmaxnreg went to local memory in the fused out_proj kernel).
  auto first_rows = [&]() { return min(M, order().m_end(clusters) * kCluster * Cfg::kBM); };
  // kTail: units 0..whole-1 are whole tiles; the rest are the last round's tiles in S k-ranges.
  // (formed where each role uses them, as first_rows above)
  auto tsplit = [&]() { return kTail ? max(tail.splits, 1) : 1; };
  auto whole = [&]() {
    return kTail && tsplit() > 1 ? order().count() - order().count() % clusters : order().count();
  };
  auto unit_count = [&]() {
    return kSplitK ? order().count() * splits
           : kTail ? whole() + (order().count() - whole()) * tsplit()
                   : order().count();
  };
  // kPair with the tail split (kTail and S = tsplit() > 1): CTA c's iterations k = 0, 1, ...
  // run the order's whole() pairs as without it (pair c + (k / 2) clusters, N-tile k % 2); the
  // R = count() - whole() pairs left for a last round run as R x S units, unit u on CTA u < R S
  // (pair whole() + u / S, k-range u % S of both of its tiles), three iterations each after the
  // CTA's whole pairs: sub 0 / 1 the k-range of N-tile 0 / 1, sub 2 an empty one (no k-tiles).
  // The pair's last arrival runs N-tile 0's epilogue at sub 1 and N-tile 1's at sub 2, so one
  // warpgroup carries the pair's stash from the first to the second, as in a whole pair.
  // Whether iteration t exists; its pair, sub (0 / 1: the N-tile; 2: the finish), k-range
  // [kt0, kt0 + nk) and whether it is a tail unit.
  auto pair_iter = [&](int t, int& pair, int& sub, int& kt0, int& nk, bool& tl) -> bool {
    const int k = (t - cluster_id) / clusters;
    pair = cluster_id + (k >> 1) * clusters;
    sub = k & 1;
    kt0 = 0;
    nk = k_tiles;
    tl = false;
    if (pair < whole()) return true;
    const int ts = tsplit(), j = k - 2 * (whole() / clusters);
    if (ts < 2 || j > 2 || cluster_id >= (order().count() - whole()) * ts) return false;
    const int s = cluster_id % ts;
    pair = whole() + cluster_id / ts;
    sub = j;
    tl = true;
    kt0 = s * k_tiles / ts;
    nk = j < 2 ? (s + 1) * k_tiles / ts - kt0 : 0;
    return true;
  };
  // Unit t of the persistent loop (both roles decode it alike): its tile (pair) index in the
  // grouped order, its k-range [kt0, kt0 + nk), and which of its tile's `parts` it is.
  auto unit = [&](int t, int& tile, int& kt0, int& nk, int& part) {
    if constexpr (kPair && kTail) {
      int sub;
      bool tl;
      pair_iter(t, tile, sub, kt0, nk, tl);
      part = 0;
      return;
    }
    int parts = 1;
    part = 0;
    tile = t;
    if (kSplitK) {
      tile = t / splits;
      part = t % splits;
      parts = splits;
    } else if (kTail && t >= whole()) {
      const int w = whole(), ts = tsplit();
      tile = w + (t - w) / ts;
      part = (t - w) % ts;
      parts = ts;
    }
    kt0 = part * k_tiles / parts;
    nk = (part + 1) * k_tiles / parts - kt0;
  };
  // Whether unit t (= cluster_id + k x clusters) of this CTA exists, and its tile (pair) and
  // N-tile. kPair: the CTA's units 2i and 2i + 1 are the two N-tiles of its i-th pair (pair
  // cluster_id + i x clusters of the order).
  auto live = [&](int t) {
    if constexpr (kPair && kTail) {
      int pair, sub, kt0, nk;
      bool tl;
      return pair_iter(t, pair, sub, kt0, nk, tl);
    } else if constexpr (kPair) {
      return cluster_id + (((t - cluster_id) / clusters) >> 1) * clusters < order().count();
    } else {
      return t < unit_count();
    }
  };
  auto tile_mn = [&](int t, int tile, int& mp, int& nt) {
    if constexpr (kPair && kTail) {
      int pair, sub, kt0, nk;
      bool tl;
      pair_iter(t, pair, sub, kt0, nk, tl);
      order().tile(pair, mp, nt);
      nt = 2 * nt + min(sub, 1);
    } else if constexpr (kPair) {
      const int k = (t - cluster_id) / clusters;
      order().tile(cluster_id + (k >> 1) * clusters, mp, nt);
      nt = 2 * nt + (k & 1);
    } else {
      order().tile(tile, mp, nt);
    }
  };

  if (threadIdx.x == 0) {
    for (int s = 0; s < S; ++s) {
      mbar_init(&full[s], 1);
      // One arrival per consumer warpgroup that reads the stage, in every CTA of the cluster.
      mbar_init(&empty[s], (kPingPong ? 1 : kWG) * kCluster);
    }
    mbar_init(&turn[0], 1);
    mbar_init(&turn[1], 1);
    mbar_init(&pf[0], 1);
    mbar_init(&pf[1], 1);
    if constexpr (kHook > 0) mbar_init(reinterpret_cast<u64*>(hook_smem), 1);
    if constexpr (kCluster > 1) {
      fence_barrier_init_cluster();
    } else {
      fence_barrier_init();
    }
  }
  if constexpr (kCluster > 1) {
    cluster_sync();
  } else {
    __syncthreads();
  }
  // The ops launch the engine programmatically (launch.PDL): it may start while the previous
  // kernel (the prologue, a quantization) still runs. Every thread waits here for that kernel's
  // end before it reads or writes global memory; only the barrier setup above overlaps it.
  griddep_wait();

  if (wg == 0) {
    setmaxnreg_dec<kProducerRegs>();
    if (threadIdx.x == 0) {
      H3_EP_DECL(ep_empty);
      int it = 0;
      const int units = unit_count();
      for (int t = cluster_id; kPair ? live(t) : t < units; t += clusters) {
        int mp, nt, tile, kt0, nk, part;
        unit(t, tile, kt0, nk, part);
        tile_mn(t, tile, mp, nt);
        const int m0 = (mp * kCluster + rank) * Cfg::kBM;
        const int nslice = nt * kBN + rank * Cfg::kBSliceRows;
        pro.before_a(m0);
        for (int kt = 0; kt < nk; ++kt, ++it) {
          const int s = it % S;
          H3_EP_STAMP(pw0);
          if (it >= S) mbar_wait(&empty[s], ((it / S) & 1) ^ 1);
          H3_EP_STAMP(pw1);
          H3_EP_ACC(ep_empty, pw0, pw1);
          u8* st = smem + s * Cfg::kStageBytes;
          const int x = (kt0 + kt) * Cfg::kElemsPerRow;
#ifdef H3_ENGINE_PROBE
          {  // (before the arrival that releases it to the stage's waiters)
            H3_EP_STAMP(ti);
            *reinterpret_cast<volatile u64*>(&ep_issue[s]) = ti;
          }
#endif
          mbar_arrive_expect_tx(&full[s], Cfg::kStageBytes);
          tma_load_2d(st, &desc_a, x, m0, &full[s]);
          u8* bdst = st + Cfg::kABytes + rank * Cfg::kBSliceRows * Cfg::kBKBytes;
          if constexpr (kCluster == 2) {
            tma_load_2d_multicast(bdst, &desc_b, x, nslice, &full[s], 3u);
          } else {
            tma_load_2d(bdst, &desc_b, x, nslice, &full[s]);
          }
        }
      }
      H3_EP_ADD(7, ep_empty);
    } else if (threadIdx.x >= 32) {
#ifdef H3_ENGINE_PROBE
      if constexpr (kObserve) {
        if (threadIdx.x == 32) {  // the landing watcher (see h3_engine_probe [9]..[15])
          u64 lat = 0, n = 0, n1 = 0, n2 = 0, n4 = 0, wlat = 0, nw = 0;
          int it = 0;
          const int units = unit_count();
          for (int t = cluster_id; kPair ? live(t) : t < units; t += clusters) {
            int tile, kt0, nk, part;
            unit(t, tile, kt0, nk, part);
            for (int kt = 0; kt < nk; ++kt, ++it) {
              const int s = it % S;
              mbar_wait(&full[s], (it / S) & 1);
              H3_EP_STAMP(tl);
              const u64 ti = *reinterpret_cast<volatile u64*>(&ep_issue[s]);
              const u64 tw = *reinterpret_cast<volatile u64*>(&ep_wait[s]);
              const u64 d = tl - ti;
              lat += d;
              ++n;
              n1 += d > 1000;
              n2 += d > 2000;
              n4 += d > 4000;
              if (tw > ti && tw < tl) {
                wlat += d;
                ++nw;
              }
            }
          }
          atomicAdd(&h3_engine_probe[9], lat);
          atomicAdd(&h3_engine_probe[10], n);
          atomicAdd(&h3_engine_probe[11], n1);
          atomicAdd(&h3_engine_probe[12], n2);
          atomicAdd(&h3_engine_probe[13], n4);
          atomicAdd(&h3_engine_probe[14], wlat);
          atomicAdd(&h3_engine_probe[15], nw);
        }
      } else {
        pro.spare(threadIdx.x / 32, first_rows(), hook_smem);
      }
#else
      pro.spare(threadIdx.x / 32, first_rows(), hook_smem);
#endif
    }
  } else {
    setmaxnreg_inc<kConsumerRegs>();
    // (the warp index through a shuffle, as wg: a row loop whose trip count ptxas cannot see
    // is warp-uniform left the mainloop divergent to it)
#ifndef H3_WG_DIVERGENT
    const int warp = __shfl_sync(0xffffffffu, threadIdx.x / 32, 0);
#else
    const int warp = threadIdx.x / 32;
#endif
    pro.consumers(blockIdx.x + gridDim.x * (warp - 4), gridDim.x * 4 * kWG, first_rows());
    const bool leader = threadIdx.x % 128 == 0;
    const int a_off = 64 * (wg - 1) * Cfg::kBKBytes;  // this warpgroup's 64 rows of the A tile
    auto release = [&](int s) {
      if (leader) {
        if constexpr (kCluster > 1) {
#pragma unroll
          for (int r = 0; r < kCluster; ++r) mbar_arrive_cluster(&empty[s], r);
        } else {
          mbar_arrive(&empty[s]);
        }
      }
    };
    if constexpr (kPingPong) {
      // Ping-pong: warpgroup w takes every other tile of the CTA's sequence (j = w - 1, w + 1, ...)
      // whole, 128 rows as two m64 halves. The ring hands out stages in tile order, so while one
      // warpgroup runs its epilogue the other one's k-tiles are already in the ring and its MMAs
      // keep the tensor cores busy.
      // NOTE: the mainloops must take turns. A parity wait cannot tell a barrier phase from the
      // one two phases later, so a warpgroup may only wait on the stages of tile j once the other
      // has done its last wait on tile j - 1 (else it sees a stale completion; this deadlocked
      // in the first GPU run). Warpgroup w waits on turn[w - 1] before each mainloop (warpgroup 1
      // not before its first) and signals the other one's turn after its last full-barrier wait.
      float acc[2][Cfg::kAcc];
      int j = wg - 1, n = 0;  // n: tiles this warpgroup has run
      for (int t = cluster_id + j * clusters; t < order().count(); t += 2 * clusters, j += 2, ++n) {
        int mp, nt;
        order().tile(t, mp, nt);
        if (wg == 2) {
          mbar_wait(&turn[1], n & 1);  // warpgroup 1's (n + 1)-th signal
        } else if (n > 0) {
          mbar_wait(&turn[0], (n - 1) & 1);  // warpgroup 2's n-th signal
        }
#pragma unroll
        for (int h = 0; h < 2; ++h)
#pragma unroll
          for (int i = 0; i < Cfg::kAcc; ++i) acc[h][i] = 0.f;
        const int it0 = j * k_tiles;
        for (int kt = 0; kt < k_tiles; ++kt) {
          const int s = (it0 + kt) % S;
          mbar_wait(&full[s], ((it0 + kt) / S) & 1);
          const u32 a_base = smem_addr(smem + s * Cfg::kStageBytes);
          const u32 b_base = smem_addr(smem + s * Cfg::kStageBytes + Cfg::kABytes);
          wgmma_fence();
#pragma unroll
          for (int k = 0; k < Cfg::kBKBytes / Cfg::kStepBytes; ++k) {
            const u64 db = wgmma_desc_k128b(b_base + Cfg::kStepBytes * k);
#pragma unroll
            for (int h = 0; h < 2; ++h)
              wgmma_step<kFmt, kBN>(
                  acc[h], wgmma_desc_k128b(a_base + h * 64 * Cfg::kBKBytes + Cfg::kStepBytes * k),
                  db, 1);
          }
          wgmma_commit();
          wgmma_wait<1>();
          if (kt > 0) release((it0 + kt - 1) % S);
        }
        if (leader) mbar_arrive(&turn[2 - wg]);  // the other warpgroup's turn
        wgmma_wait<0>();
        if (k_tiles > 0) release((it0 + k_tiles - 1) % S);
        u8* my_staging = staging + (wg - 1) * (Cfg::kStagingBytes / 2);
        const int row0 = (mp * kCluster + rank) * Cfg::kBM;
        // (each fragment fenced below the wait just before its epilogue: see the cooperative
        // loop's NOTE)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          fence_fragment(acc[h]);
          epi(acc[h], row0 + 64 * h, nt * kBN, my_staging, wg);
        }
      }
      if (leader) bulk_wait_all();
    } else {
      float acc[Cfg::kAcc];
      int it = 0, tiles = 0;
      u8* my_staging = staging + (wg - 1) * (Cfg::kStagingBytes / kWG);
      [[maybe_unused]] u8* my_vec = vec_all + (wg - 1) * kVec;
      // kTail: the last round's split tiles' partials (tail_sum below, in three parts for the
      // pairs' tail, which writes two partials, N-tile 0's and 1's, per arrival).
      // Partial ss of tail tile ti, this thread's first pair of values.
      auto tail_slot = [&](int ti, int ss) {
        return tail.part +
               (static_cast<i64>(((ti * tsplit() + ss) * kCluster + rank) * kWG + (wg - 1)) *
                    (Cfg::kAcc / 2) * 128 + threadIdx.x % 128) * 2;
      };
      // f as partial s of tail tile ti
      auto tail_put = [&](const float(&f)[Cfg::kAcc], int ti, int s) {
        float* mine = tail_slot(ti, s);
#pragma unroll
        for (int i = 0; i < Cfg::kAcc / 2; ++i) st_cg_f2(mine + 256 * i, f[2 * i], f[2 * i + 1]);
        __threadfence();
      };
      // This warpgroup's arrival on counter ci (after its partials): true in the last of S.
      auto tail_arrive = [&](int ci) -> bool {
        bool last = false;
        u32* cnt = tail.count + (ci * kCluster + rank) * kWG + (wg - 1);
        named_barrier_sync(wg, 128);
        if (leader) {
          last = atomicAdd(cnt, 1u) == static_cast<u32>(tsplit() - 1);
          if (last) *cnt = 0u;  // every arrival is in: ready for the next launch
        }
        // (the barrier's result is the same in every thread; the shuffle tells ptxas so, as
        // the warpgroup index above: a branch on it would leave the loop divergent to ptxas)
#ifndef H3_WG_DIVERGENT
        return __shfl_sync(0xffffffffu, named_barrier_or(wg, 128, last), 0) != 0;
#else
        return named_barrier_or(wg, 128, last);
#endif
      };
      // f = the sum of tail tile ti's S partials (after the last arrival)
      auto tail_get = [&](float(&f)[Cfg::kAcc], int ti) {
        __threadfence();
        // f = ((p_0 + p_1) + p_2) + ..., every partial (this thread's own too) read back from L2:
        // the fixed order makes the bits independent of which unit arrives last, and summing in
        // place needs no second fragment of registers.
        // The loads go in chunks where a whole fragment's worth in flight would not fit beside
        // f in the consumers' registers (kAcc >= 112: ptxas hoisted every load and spilled the
        // loop state of the mainloop instead): a __syncwarp between chunks kept ptxas from
        // moving the next chunk's loads above it. NOTE: since the consumers' code is uniform to
        // ptxas (session 20) it drops that __syncwarp and issues every load at once; seeded
        // with -0 instead of a select on the first partial, the sum fits without a spill.
        constexpr int kPairs = Cfg::kAcc / 2;
        constexpr int kChunk = 2 * Cfg::kAcc + 32 <= kConsumerRegs ? kPairs : kPairs / 2;
#pragma unroll
        for (int i = 0; i < Cfg::kAcc; ++i) f[i] = -0.f;  // -0 + x is x, bit for bit
        for (int ss = 0; ss < tsplit(); ++ss) {
          const float* p = tail_slot(ti, ss);
#pragma unroll
          for (int c = 0; c < kPairs; c += kChunk) {
#pragma unroll
            for (int i = c; i < c + kChunk; ++i) {
              const float2 v = ld_cg_f2(p + 256 * i);
              f[2 * i] += v.x;
              f[2 * i + 1] += v.y;
            }
            if constexpr (kChunk < kPairs) __syncwarp();
          }
        }
      };
      // k-range s of split tile ti: writes this warpgroup's partial, counts it, and returns true
      // in the last of the S arrivals, with f replaced by the sum of the S partials in split order.
      auto tail_sum = [&](float(&f)[Cfg::kAcc], int ti, int s) -> bool {
        tail_put(f, ti, s);
        if (!tail_arrive(ti)) return false;
        tail_get(f, ti);
        return true;
      };
      // kPair && kTail: whether this warpgroup is its tail pair's last arrival (set at sub 1,
      // read at sub 2)
      [[maybe_unused]] bool pair_fin = false;
      // (the unit count is formed again at each test, from the opaque M: held across the
      // mainloop, it was the word ptxas spilled in the 192-row FP8 kernel with the tail split)
      H3_EP_STAMP(ep_start);
#ifndef H3_T_CARRIED
      // t is formed from `tiles` at each iteration rather than carried beside it: carried,
      // ptxas kept it in local memory in the BF16 pre-attention kernel once the loop state
      // moved to uniform registers (session 20). -DH3_T_CARRIED (diagnostic) restores the
      // carried form for A/B runs (probe_engine.py --ab tiles).
      for (;; ++tiles) {
        const int t = cluster_id + tiles * clusters;
        if (!live(t)) break;
#else
      for (int t = cluster_id; live(t); t += clusters, ++tiles) {
#endif
        H3_EP_STAMP(ep0);
        int mp, nt, tile, kt0, part, nk;
        unit(t, tile, kt0, nk, part);
        // NOTE: split units run fewer k-tiles; k_tiles is shadowed so that the loops below are
        // the measured ones for every other kernel.
        const int k_tiles = nk;
        tile_mn(t, tile, mp, nt);
        const int row0 = (mp * kCluster + rank) * Cfg::kBM + 64 * (wg - 1);
        // (before the fragments are live: in the first k-tile it spilled the loop counter)
        if constexpr (kVec > 0) epi.template prefetch_vec<kBN>(row0, nt * kBN, my_vec);
#pragma unroll
        for (int i = 0; i < Cfg::kAcc; ++i) acc[i] = 0.f;
        const int it0 = it;
        // Issue the 4 k-steps of k-tile kt into fragment f (scale_d = 0 on the first one when
        // `fresh`); waits for the stage's TMA bytes first. After k-tile 0, the epilogue's
        // operand prefetch (if any) starts.
        H3_EP_DECL(ep_full);
        H3_EP_DECL(ep_full_head);
        auto issue = [&](float(&f)[Cfg::kAcc], int kt, bool fresh) {
          const int s = (it0 + kt) % S;
          H3_EP_STAMP(fw0);
#ifdef H3_ENGINE_PROBE
          if (wg == 1 && leader) *reinterpret_cast<volatile u64*>(&ep_wait[s]) = fw0;
#endif
          mbar_wait(&full[s], ((it0 + kt) / S) & 1);
          H3_EP_STAMP(fw1);
          H3_EP_ACC(ep_full, fw0, fw1);
          H3_EP_ACC_IF(kt < S, ep_full_head, fw0, fw1);
          const u32 a_base = smem_addr(smem + s * Cfg::kStageBytes + a_off);
          const u32 b_base = smem_addr(smem + s * Cfg::kStageBytes + Cfg::kABytes);
          wgmma_fence();
          // Each k-step's descriptors are the k-tile's plus the step's offset in 16-byte units
          // (the start-address field cannot carry: shared addresses stay below 2^18), not rebuilt
          // from the address per wgmma: ~9% fewer mainloop instructions; measured 1.2-5.7% faster
          // FP8 kernels, the same bytes (benchmarks/NOTES.md session 19; the rebuilt form is at
          // commit 9bb6908).
          {
            const u64 da = wgmma_desc_k128b(a_base), db = wgmma_desc_k128b(b_base);
            const u64 hi = da & 0xffffffff00000000ull;  // the same in both (layout, no address)
            const u32 alo = static_cast<u32>(da), blo = static_cast<u32>(db);
#pragma unroll
            for (int k = 0; k < Cfg::kBKBytes / Cfg::kStepBytes; ++k)
              wgmma_step<kFmt, kBN>(f, hi | (alo + (Cfg::kStepBytes >> 4) * k),
                                    hi | (blo + (Cfg::kStepBytes >> 4) * k), fresh ? k : 1);
          }
          wgmma_commit();
          if constexpr (kPf) {
            if (kt == 0) {
              if constexpr (kVec > 0) {
                epi.template prefetch<kBN>(row0, nt * kBN, my_staging, &pf[wg - 1], my_vec);
              } else {
                epi.template prefetch<kBN>(row0, nt * kBN, my_staging, &pf[wg - 1]);
              }
            }
          }
        };
        auto stage_of = [&](int kt) { return (it0 + kt) % S; };
        if constexpr (kPromote == 0) {
          for (int kt = 0; kt < k_tiles; ++kt) {
            issue(acc, kt, false);
            // Keep one k-tile of wgmma in flight: the previous one has completed, free its stage.
            wgmma_wait<1>();
            if (kt > 0) release(stage_of(kt - 1));
          }
          wgmma_wait<0>();
          // NOTE: without the fence the compiler may hoist epilogue reads of acc above the wait;
          // ptxas then serializes every wgmma of the mainloop (C7514: the BF16 pre-attention
          // kernels until 2026-12-01, one wgmma in flight at a time).
          fence_fragment(acc);
          if (k_tiles > 0) release(stage_of(k_tiles - 1));
        } else if constexpr (kPromote == 1) {
          float part[Cfg::kAcc];
          for (int kt = 0; kt < k_tiles; ++kt) {
            issue(part, kt, true);
            wgmma_wait<0>();
            release(stage_of(kt));
            fence_fragment(part);
#pragma unroll
            for (int i = 0; i < Cfg::kAcc; ++i) acc[i] += part[i];
          }
        } else if constexpr (kPromote == 3 || kPromote == 4) {
          // A fresh fragment takes kSpan k-tiles (kSpan x 128-deep FP8 sums in the tensor core)
          // before its fp32 add: 1 / kSpan of mode 1's drains and adds. Each k-tile is its own
          // commit group, and its stage is released as soon as that group completes, so the
          // producer refills the ring while the span's later k-tiles run (holding a whole span
          // of a 4-stage ring starved it: mode 4 measured 0.66x of _scaled_mm that way).
          // The two warpgroups' spans are offset by half a span (warpgroup 2's first span is
          // kSpan / 2 long): they wait on the same full barriers, so aligned spans would drain the
          // tensor cores together; offset, one warpgroup's drain and add run while the other's
          // k-tiles are queued.
          constexpr int kSpan = kPromote == 3 ? 2 : 4;
          float part[Cfg::kAcc];
          auto add_part = [&]() {
            fence_fragment(part);
#pragma unroll
            for (int i = 0; i < Cfg::kAcc; ++i) acc[i] += part[i];
          };
          // n < kSpan k-tiles from kt (warpgroup 2's first span, the tail): one wait for all.
          auto short_span = [&](int kt, int n) {
#pragma unroll
            for (int q = 0; q < kSpan - 1; ++q)
              if (q < n) issue(part, kt + q, q == 0);
            wgmma_wait<0>();
#pragma unroll
            for (int q = 0; q < kSpan - 1; ++q)
              if (q < n) release(stage_of(kt + q));
            add_part();
          };
          int kt = 0;
          if (wg == 2 && k_tiles > kSpan / 2) {
            short_span(0, kSpan / 2);
            kt = kSpan / 2;
          }
          for (; kt + kSpan <= k_tiles; kt += kSpan) {
#pragma unroll
            for (int q = 0; q < kSpan; ++q) issue(part, kt + q, q == 0);
            // wait_group needs an immediate: q = 0..kSpan-1 leave kSpan-1-q groups pending
            wgmma_wait<kSpan - 1>();
            release(stage_of(kt));
            wgmma_wait<kSpan - 2>();
            release(stage_of(kt + 1));
            if constexpr (kSpan == 4) {
              wgmma_wait<1>();
              release(stage_of(kt + 2));
              wgmma_wait<0>();
              release(stage_of(kt + 3));
            }
            add_part();
          }
          if (kt < k_tiles) short_span(kt, k_tiles - kt);
        } else {
          float p0[Cfg::kAcc], p1[Cfg::kAcc];
          // Issue k-tile kt into `cur` (if any remain), then retire k-tile kt - 1 from `prev`.
          auto step = [&](float(&cur)[Cfg::kAcc], float(&prev)[Cfg::kAcc], int kt) {
            if (kt < k_tiles) {
              issue(cur, kt, true);
              wgmma_wait<1>();
            } else {
              wgmma_wait<0>();
            }
            release(stage_of(kt - 1));
#pragma unroll
            for (int i = 0; i < Cfg::kAcc; ++i) acc[i] += prev[i];
          };
          if (k_tiles > 0) issue(p0, 0, true);
          for (int kt = 1; kt <= k_tiles; kt += 2) {
            step(p1, p0, kt);
            if (kt + 1 <= k_tiles) step(p0, p1, kt + 1);
          }
        }
        it += k_tiles;
        H3_EP_STAMP(ep1);
        H3_EP_ADD(0, ep1 - ep0);
        H3_EP_ADD(3, 1);
        H3_EP_ADD(6, ep_full);
        H3_EP_ADD(8, ep_full_head);
        if constexpr (kPf) mbar_wait(&pf[wg - 1], tiles & 1);
        H3_EP_STAMP(ep2);
        H3_EP_ADD(1, ep2 - ep1);
        if constexpr (kTail) {
          // The unit is decoded again from an opaque copy of t, so that nothing of the first
          // decode stays live across the mainloop.
          int tt = t;
          asm volatile("" : "+r"(tt));
          if constexpr (kPair) {
            int pair, sub, k0, n0;
            bool tl;
            pair_iter(tt, pair, sub, k0, n0, tl);
            if (tl) {  // tail tiles 2 tp and 2 tp + 1, counter tp (see pair_iter)
              const int tp = pair - whole();
              if (sub < 2) tail_put(acc, 2 * tp + sub, cluster_id % tsplit());
              if (sub == 0) continue;
              if (sub == 1) {
                pair_fin = tail_arrive(tp);
                if (!pair_fin) continue;  // not the pair's last arrival
                tail_get(acc, 2 * tp);
                --nt;  // N-tile 0's epilogue (this iteration's k-range was N-tile 1's)
              } else {
                // (through a shuffle: branched on as it is, the flag carried across iterations
                // made ptxas move the mainloop's stage and descriptor state to vector registers,
                // 64 R2UR beside the wgmmas)
                if (!__shfl_sync(0xffffffffu, pair_fin, 0)) continue;
                tail_get(acc, 2 * tp + 1);
              }
            }
          } else if (tt >= whole()) {
            int ti, k0, n0, pp;
            unit(tt, ti, k0, n0, pp);
            if (!tail_sum(acc, ti - whole(), pp)) continue;  // not its tile's last arrival
          }
        }
        if constexpr (kSplitK) {
          epi(acc, row0, nt * kBN, my_staging, wg, part);
        } else if constexpr (kVec > 0) {
          epi(acc, row0, nt * kBN, my_staging, wg, my_vec);
        } else {
          epi(acc, row0, nt * kBN, my_staging, wg);
        }
        H3_EP_STAMP(ep3);
        H3_EP_ADD(2, ep3 - ep2);
        H3_EP_ADD(4, 1);
      }
      if (leader) bulk_wait_all();  // the last TMA stores complete before the CTA exits
      H3_EP_STAMP(ep_end);
      H3_EP_ADD(5, ep_end - ep_start);
    }
  }
  // NOTE: no CTA may exit while its peer can still arrive on its barriers.
  if constexpr (kCluster > 1) cluster_sync();
#else
  __trap();
#endif
}

// Store a consumer warpgroup's 64 x (2 kAcc) fragment as bf16 through TMA, in boxes of 64 rows x
// kBoxCols columns (64: 128-byte rows with the 128B swizzle, 16-byte chunk j of row r at chunk
// j ^ (r % 8); 32: 64-byte rows with the 64B swizzle, chunk c of row r at c ^ ((r / 2) % 4);
// either way a warp's 8 rows x 4 lanes hit 32 distinct banks). In passes of 128 columns the
// warpgroup writes the pass's boxes into `staging`, fences them to the async proxy, and one thread
// calls store(pass, box, src) for each, which issues the TMA store (the tensor map has matching
// boxes and swizzle and clips past its edges). Before a pass overwrites the buffer, that thread
// waits for the previous stores to have read it.
// kWaitRead = false: the first pass skips the wait for earlier stores' reads (a buffer that the
// caller knows no pending store reads). Passes [kP0, kP1) only (kP1 < 0: to the last), so that a
// caller can run other work between passes (a pass's wait then reads as the earlier pass's).
template <int kBoxCols, int kAcc, class StoreBox, int kBoxes = kStagingBoxes,
          bool kWaitRead = true, int kP0 = 0, int kP1 = -1, bool kPacked = false>
H3_DEVICE void store_fragment_bf16_boxes(const float (&d)[kAcc], u8* staging, int bar_id,
                                         const StoreBox& store) {
  static_assert(kBoxCols == 64 || kBoxCols == 32, "64- or 32-column boxes");
  constexpr int kGroups = kAcc / 4;           // 8-column groups
  constexpr int kBoxGroups = kBoxCols / 8;    // groups per box
  constexpr int kRowBytes = 2 * kBoxCols;     // 128 or 64
  constexpr int kBoxBytes = 64 * kRowBytes;   // 8 or 4 KiB
  // NOTE: a partly filled box would store stale staging bytes into the next tile's columns.
  static_assert(kGroups % kBoxGroups == 0, "the fragment must fill whole boxes");
  constexpr int kPass = 8 * kBoxes;  // groups per pass: the staging buffer's 8 KiB boxes
  const int tid = threadIdx.x % 128, lane = tid % 32, w = tid / 32;
  const u32 base = smem_addr(staging);
#pragma unroll
  for (int p = kP0; p < (kP1 < 0 ? (kGroups + kPass - 1) / kPass : kP1); ++p) {
    if (p * kPass >= kGroups) break;
    if (tid == 0 && (kWaitRead || p > 0)) bulk_wait_read();
    named_barrier_sync(bar_id, 128);
#pragma unroll
    for (int jj = 0; jj < kPass; ++jj) {
      const int j = kPass * p + jj;
      if (j >= kGroups) break;
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        // r % 8 == lane / 4 and (r / 2) % 4 == (lane / 8) % 4: the swizzles' row terms
        const int r = 16 * w + lane / 4 + 8 * h;
        const u32 addr = base + (jj / kBoxGroups) * kBoxBytes + r * kRowBytes +
                         (((jj % kBoxGroups) ^ (kBoxCols == 64 ? lane / 4 : (lane / 8) % 4)) * 16) +
                         4 * (lane % 4);
        // (kPacked: the pair already packed in its first float, PreAttnMath::apply's kPack)
        const u32 v = kPacked ? __float_as_uint(d[4 * j + 2 * h])
                              : pack_bf16x2(f32_to_bf16(d[4 * j + 2 * h]),
                                            f32_to_bf16(d[4 * j + 2 * h + 1]));
        asm volatile("st.shared.u32 [%0], %1;" ::"r"(addr), "r"(v) : "memory");
      }
    }
    fence_proxy_async_smem();
    named_barrier_sync(bar_id, 128);
    if (tid == 0) {
#pragma unroll
      for (int box = 0; box < kPass / kBoxGroups; ++box)
        if (kPass * p + kBoxGroups * box < kGroups) store(p, box, staging + box * kBoxBytes);
      bulk_commit();
    }
  }
}

// 64-column boxes (the tensor map: 64 x 64 boxes, 128B swizzle); store(pass, box, src), box 0 ..
// kBoxes - 1 (passes of 64 kBoxes columns).
template <int kAcc, class StoreBox, int kBoxes = kStagingBoxes, bool kWaitRead = true,
          int kP0 = 0, int kP1 = -1, bool kPacked = false>
H3_DEVICE void store_fragment_bf16(const float (&d)[kAcc], u8* staging, int bar_id,
                                   const StoreBox& store) {
  store_fragment_bf16_boxes<64, kAcc, StoreBox, kBoxes, kWaitRead, kP0, kP1, kPacked>(
      d, staging, bar_id, store);
}

// 32-column boxes for fragments whose width is a whole number of 32 but not of 64 columns (a
// 192-wide FC1 tile gives 96 y columns; the tensor map: 32 x 64 boxes, 64B swizzle);
// store(box, src) with `box` the fragment's 32-column box index.
template <int kAcc, class StoreBox>
H3_DEVICE void store_fragment_bf16_w32(const float (&d)[kAcc], u8* staging, int bar_id,
                                       const StoreBox& store) {
  store_fragment_bf16_boxes<32>(d, staging, bar_id, [&](int p, int box, const u8* src) {
    store(2 * kStagingBoxes * p + box, src);
  });
}

// Shared-memory address of the bf16 pair that thread `lane` of warp `w` holds for 8-column group
// j, row half h, in a full-width staging buffer of 64 x 64 boxes (box j / 8 at 8 KiB each, 128B
// swizzle: the layout store_fragment_bf16 writes and a 64 x 64 TMA box with that swizzle loads).
H3_DEVICE u32 staging_pair_addr(u32 base, int j, int h, int w, int lane) {
  const int r = 16 * w + lane / 4 + 8 * h;
  return base + (j / 8) * 8192 + r * 128 + (((j % 8) ^ (lane / 4)) * 16) + 4 * (lane % 4);
}

// As store_fragment_bf16, with a staging buffer holding the whole 64 x (2 kAcc) block (kAcc / 32
// boxes of 64 columns): one pass, no wait for earlier stores (the caller has made the buffer free,
// e.g. before prefetching an operand into it); store(box, src) issues box `box`'s TMA store.
template <int kAcc, class StoreBox>
H3_DEVICE void store_fragment_bf16_full(const float (&d)[kAcc], u8* staging, int bar_id,
                                        const StoreBox& store) {
  constexpr int kGroups = kAcc / 4;
  static_assert(kGroups % 8 == 0, "whole 64-column boxes");
  const int tid = threadIdx.x % 128, lane = tid % 32, w = tid / 32;
  const u32 base = smem_addr(staging);
#pragma unroll
  for (int j = 0; j < kGroups; ++j)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const u32 v = pack_bf16x2(f32_to_bf16(d[4 * j + 2 * h]), f32_to_bf16(d[4 * j + 2 * h + 1]));
      asm volatile("st.shared.u32 [%0], %1;" ::"r"(staging_pair_addr(base, j, h, w, lane)), "r"(v)
                   : "memory");
    }
  fence_proxy_async_smem();
  named_barrier_sync(bar_id, 128);
  if (tid == 0) {
#pragma unroll
    for (int box = 0; box < kGroups / 8; ++box) store(box, staging + box * 8192);
    bulk_commit();
  }
}

// The plain epilogue: C = bf16((acc * row_scale[m]) * col_scale[n]), scales optional, stored by TMA.
// kVecCols > 0 (tile N, FP8 tiles of 192 columns: their ring keeps its stages): the row and column
// scales come through shared memory (kVecBytes: 64 row + kVecCols column floats, copied during
// the mainloop) and the block is stored from a full-width staging buffer in one pass.
// kBoxes: 8 KiB staging boxes per warpgroup (1: 64-column store passes, for the 192 x 192 bf16
// tiles whose three warpgroups' staging would otherwise cost the ring a stage).
template <int kVecCols = 0, int kBoxes = h3::kStagingBoxes>
struct EpiScaleBf16 {
  static constexpr int kVecBytes = kVecCols > 0 ? 4 * (64 + kVecCols) : 0;
  static constexpr bool kFullStaging = kVecCols > 0;
  static constexpr int kStagingBoxes = kBoxes;
  const float* __restrict__ row_scale;
  const float* __restrict__ col_scale;
  const TmaDesc* desc_c;
  int M, N;

  template <int kAcc>
  H3_DEVICE void operator()(float (&d)[kAcc], int row0, int col0, u8* staging, int wg) const {
    const int lane = threadIdx.x % 32, w = (threadIdx.x % 128) / 32;
    if (row_scale != nullptr || col_scale != nullptr) {
      float rs[2];
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int row = row0 + 16 * w + mma_c_row(lane, 2 * h);
        rs[h] = row_scale != nullptr && row < M ? row_scale[row] : 1.f;
      }
      // NOTE: column scales in batches of 8 (n224: 4) groups, loaded before use and shared by
      // both row halves (a load-use per group leaves one memory latency exposed per group).
      constexpr int kBatch = (kAcc / 4) % 8 == 0 ? 8 : 4;
      static_assert((kAcc / 4) % kBatch == 0, "whole batches of column groups");
#pragma unroll
      for (int j0 = 0; j0 < kAcc / 4; j0 += kBatch) {
        float2 c[kBatch];
#pragma unroll
        for (int t = 0; t < kBatch; ++t) {
          const int col = col0 + 8 * (j0 + t) + mma_c_col(lane, 0);
          c[t] = col_scale != nullptr && col < N ? *reinterpret_cast<const float2*>(col_scale + col)
                                                 : make_float2(1.f, 1.f);
        }
#pragma unroll
        for (int t = 0; t < kBatch; ++t)
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const int j = j0 + t;
            d[4 * j + 2 * h] = (d[4 * j + 2 * h] * rs[h]) * c[t].x;
            d[4 * j + 2 * h + 1] = (d[4 * j + 2 * h + 1] * rs[h]) * c[t].y;
          }
      }
    }
    if constexpr ((kAcc / 4) % 8 == 0) {
      auto store = [&](int p, int box, const u8* src) {
        const int x = col0 + 64 * kBoxes * p + 64 * box;
        if (x < N) tma_store_2d(desc_c, src, x, row0);
      };
      store_fragment_bf16<kAcc, decltype(store), kBoxes>(d, staging, wg, store);
    } else {  // n224: 32-column boxes (desc_c has 32 x 64 boxes, 64B swizzle)
      store_fragment_bf16_w32(d, staging, wg, [&](int box, const u8* src) {
        const int x = col0 + 32 * box;
        if (x < N) tma_store_2d(desc_c, src, x, row0);
      });
    }
  }

  // kVecCols: rows row0..row0+63 (zeros past M) at vec[0..63], columns col0.. at vec[64..]
  template <int kBN>
  H3_DEVICE void prefetch_vec(int row0, int col0, u8* vec) const {
    static_assert(kBN == kVecCols, "the vector area holds kVecCols columns");
    float* v = reinterpret_cast<float*>(vec);
    cp_async_wait_all();  // a previous unit's copies (one that ran no epilogue) have landed
    vec_copy_f32<64, true>(v, row_scale, row0, M);
    vec_copy_f32<kBN, true>(v + 64, col_scale, col0, N);
    cp_async_commit();
  }

  template <int kAcc>
  H3_DEVICE void operator()(float (&d)[kAcc], int row0, int col0, u8* staging, int wg,
                            u8* vec) const {
    static_assert(2 * kAcc == kVecCols, "the vector area holds this tile's columns");
    const int tid = threadIdx.x % 128, lane = tid % 32, w = tid / 32;
    if (tid == 0) bulk_wait_read();  // the previous tile's stores have read the staging buffer
    vec_wait(wg);
    const u32 v = smem_addr(vec);
    float rs[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) rs[h] = lds_f32(v + 4 * (16 * w + mma_c_row(lane, 2 * h)));
#pragma unroll
    for (int j = 0; j < kAcc / 4; ++j) {
      const float2 c = lds_f2(v + 4 * (64 + 8 * j + mma_c_col(lane, 0)));
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        d[4 * j + 2 * h] = (d[4 * j + 2 * h] * rs[h]) * c.x;
        d[4 * j + 2 * h + 1] = (d[4 * j + 2 * h + 1] * rs[h]) * c.y;
      }
    }
    // (the vector reads above come before store_fragment_bf16_full's barrier)
    store_fragment_bf16_full(d, staging, wg, [&](int box, const u8* src) {
      const int x = col0 + 64 * box;
      if (x < N) tma_store_2d(desc_c, src, x, row0);
    });
  }
};

}  // namespace h3
