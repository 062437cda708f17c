// minimax_h3_fp8_out_proj (SPEC.md section 5), the GEMM launch: the W8A8 projection on the sm_90a
// engine (e4m3, fp32 promotion) with the gated-residual epilogue
//   o   = bf16((acc * act_scale[m]) * w_scale[n])
//   out = bf16(residual[m, n] + bf16(gate[i, n] * o)),   i = gate_index[m]
//   out = residual[m, n] exactly when i is outside [0, rows) (a select: o never reaches the row)
// bf16 x bf16 products are exact in fp32, so the only roundings are the two bf16 ones. `out` may
// alias `residual`: each residual tile is read (by TMA into shared memory, or into registers)
// before the same tile of out is stored.
// Two forms: the per-token FP8 quantization of attn_out inside this launch behind per-tile ready
// counters (ProQuantRowsFp8 below; out_proj.FUSED_QUANT, the default: level with two launches
// on the H200, NOTES.md sessions 7 and 9), or as its own launch before this one (quantize.cu).
// Verified on the H200 (both forms, 2026-12-01).
#include "h3/gemm_nvfp4.cuh"
#include "h3/gemm_sm90.cuh"
#include "h3/quant.cuh"
#include "h3/ready_rows.cuh"
#include "h3/reduce.cuh"

namespace h3 {

// kLiveScale: act_scale is written during this launch (the fused quantization), so it is read
// through L2 (ld.global.cg), never through the read-only path.
// kAlpha: o = bf16(acc * alpha) instead (the NVFP4 op's Hopper path on dequantized operands;
// act_scale and w_scale unused).
// kResTma: the residual tile comes by TMA (desc_res: 64 x 64 boxes, 128B swizzle, the layout of
// the output staging) into the warpgroup's full-width staging buffer while the mainloop runs
// (the engine's epilogue prefetch); each thread reads its residual pairs from shared memory at
// the addresses its outputs then overwrite. Without it, each thread loads its residual pairs
// from global memory in the epilogue (one exposed DRAM latency per batch of column groups).
// kVecCols > 0 (tile N; with kResTma, without kAlpha): the weight scales and the gate indices of
// the tile come through shared memory (the engine's kVecBytes, copied during the mainloop), every
// gate pair is loaded at once, and each output pair is formed in bf16x2 (o's conversion, the
// gated product and the residual add: add_bf16x2, the same bits as the fp32 add rounded) and
// written over its residual pair in the staging buffer; rows with an invalid index keep the
// residual bytes there. Session 10's engine probe: the per-tile epilogue went from 5.0 to 3.8 us
// (of ~35 us), and the kernel's time did not move (NOTES.md session 10). Session 18 cut its issued
// instructions from 1215 to ~700 per warp and tile (below): the op 6-8% faster on the H200.
template <bool kLiveScale, bool kAlpha = false, bool kResTma = false, int kVecCols = 0>
struct EpiGatedResidual {
  static_assert(kVecCols == 0 || (kResTma && !kAlpha), "vectors: the residual by TMA, no alpha");
  static constexpr bool kPrefetch = kResTma;
  // [0, 4 kVecCols): w_scale of the tile's columns; then 64 gate indices (as given: 8 bytes each
  // when int64, else 4); then the 64 rows' act_scale (zeros past M; copied by prefetch, after
  // the tile's first k-tile has landed, so that in the single-launch form the rows' scales are
  // published: the producer's acquire of the tile's row counter precedes its first A load)
  static constexpr int kVecBytes = kVecCols > 0 ? 4 * kVecCols + 64 * 8 + 64 * 4 : 0;
  static constexpr int kVecAsOff = 4 * kVecCols + 64 * 8;
  const float* act_scale;               // [M]
  const float* __restrict__ w_scale;    // [N]
  const bf16_t* residual;               // [M, N] (may alias the output)
  const bf16_t* __restrict__ gate;      // [rows, N], row stride gate_stride
  i64 gate_stride, rows;
  const void* __restrict__ gate_index;  // int32 / int64 [M]
  int index_is_64, M, N;
  const TmaDesc* desc_out;              // out [M, N] bf16, 64 x 64 boxes, 128B swizzle
  float alpha = 1.f;                    // kAlpha
  const TmaDesc* desc_res = nullptr;    // kResTma: residual [M, N], boxes as desc_out

  // kResTma: the residual block [row0, row0 + 64) x [col0, col0 + kBN) into `staging` (box b of 64
  // columns at b * 8 KiB), completing on `bar`; issued by the warpgroup's thread 0, the one that
  // issued the previous tile's output stores from this buffer (so it can wait for their reads).
  // With vectors (kVecCols), the engine passes the vector area: the rows' act_scale is copied
  // into it here too (cp.async, waited for by the epilogue's vec_wait).
  template <int kBN>
  H3_DEVICE void prefetch(int row0, int col0, u8* staging, u64* bar, u8* vec = nullptr) const {
    if constexpr (kVecCols > 0) {
      const int tid = threadIdx.x % 128, row = row0 + tid;
      if (tid < 64)
        cp_async4(vec + kVecAsOff + 4 * tid, act_scale + (row < M ? row : 0), row < M ? 4 : 0);
      cp_async_commit();
    }
    if (threadIdx.x % 128 != 0) return;
    bulk_wait_read();
    int boxes = 0;
#pragma unroll
    for (int b = 0; b < kBN / 64; ++b) boxes += col0 + 64 * b < N;
    mbar_arrive_expect_tx(bar, boxes * 8192);
#pragma unroll
    for (int b = 0; b < kBN / 64; ++b)
      if (col0 + 64 * b < N) tma_load_2d(staging + b * 8192, desc_res, col0 + 64 * b, row0, bar);
  }

  template <int kBN>
  H3_DEVICE void prefetch_vec(int row0, int col0, u8* vec) const {
    static_assert(kBN == kVecCols, "the vector area holds kVecCols columns");
    const int tid = threadIdx.x % 128;
    cp_async_wait_all();  // a previous unit's copies (one that ran no epilogue) have landed
#pragma unroll
    for (int c = tid; c < kBN; c += 128) {
      const int col = col0 + c;
      cp_async4(vec + 4 * c, w_scale + (col < N ? col : 0), col < N ? 4 : 0);
    }
    if (tid < 64) {
      const int row = row0 + tid, r = row < M ? row : 0, bytes = row < M ? 4 : 0;
      if (index_is_64) {
        cp_async8(vec + 4 * kBN + 8 * tid, static_cast<const i64*>(gate_index) + r, 2 * bytes);
      } else {
        cp_async4(vec + 4 * kBN + 4 * tid, static_cast<const int*>(gate_index) + r, bytes);
      }
    }
    cp_async_commit();
  }

  // The vector epilogues' end: the staged block (kBoxes 64-column boxes) made visible to the
  // async proxy, then stored by TMA by the warpgroup's thread 0.
  template <int kBoxes>
  H3_DEVICE void store_staged(u8* staging, int wg, int row0, int col0) const {
    fence_proxy_async_smem();
    named_barrier_sync(wg, 128);  // (every vector read is above this barrier)
    if (threadIdx.x % 128 == 0) {
#pragma unroll
      for (int box = 0; box < kBoxes; ++box) {
        const int x = col0 + 64 * box;
        if (x < N) tma_store_2d(desc_out, staging + box * 8192, x, row0);
      }
      bulk_commit();
    }
  }

  // kVecCols: the epilogue from the shared-memory vectors (see above), written for few
  // instructions (session 18: Nsight Compute counted 1215 per warp per tile in the form before,
  // at commit 7d4efb3 as -DH3_GATED_EPI_V1, against 367 in the plain epilogue): the eight swizzled
  // staging addresses are formed once (every pair is then one of them plus a constant, folded
  // into the LDS / STS offsets), the gate pointers once per row half (each load an offset), no
  // branch per pair (the store is predicated on the row's index; rows with an invalid index keep
  // the residual bytes), and the column bound checked once per tile (a full tile loads without
  // it). The same operations on the same operands: the same bytes.
  template <int kAcc>
  H3_DEVICE void operator()(float (&d)[kAcc], int row0, int col0, u8* staging, int wg,
                            u8* vec) const {
    static_assert(2 * kAcc == kVecCols && (kAcc / 4) % 8 == 0, "the tile's columns, 64-col boxes");
    constexpr int kGroups = kAcc / 4;
    const int tid = threadIdx.x % 128, lane = tid % 32, w = tid / 32, q4 = lane % 4, r8 = lane / 4;
    vec_wait(wg);
    const u32 vws = smem_addr(vec) + 8 * q4, vidx = smem_addr(vec) + 4 * kVecCols;
    float as[2];
    bool valid[2];
    const u32* gp[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = 16 * w + r8 + 8 * h, row = row0 + r;
      const bool in = row < M;
      as[h] = lds_f32(smem_addr(vec) + kVecAsOff + 4 * r);  // (0 past M)
      i64 gi = -1;
      if (in)
        gi = index_is_64 ? static_cast<i64>(lds_s64(vidx + 8 * r))
                         : static_cast<i64>(static_cast<int>(lds_u32(vidx + 4 * r)));
      valid[h] = gi >= 0 && gi < rows;  // false past M
      gp[h] =
          reinterpret_cast<const u32*>(gate + (valid[h] ? gi : 0) * gate_stride + col0 + 2 * q4);
    }
    // the gate pairs, all at once (one memory latency); group j's pair is word 4 j of gp[h]
    u32 gv[2][kGroups];
    if (col0 + kVecCols <= N) {
#pragma unroll
      for (int j = 0; j < kGroups; ++j)
#pragma unroll
        for (int h = 0; h < 2; ++h) gv[h][j] = valid[h] ? __ldg(gp[h] + 4 * j) : 0u;
    } else {
      const int lim = N - col0 - 2 * q4;  // group j's pair is in bounds when 8 j < lim
#pragma unroll
      for (int j = 0; j < kGroups; ++j)
#pragma unroll
        for (int h = 0; h < 2; ++h) gv[h][j] = valid[h] && 8 * j < lim ? __ldg(gp[h] + 4 * j) : 0u;
    }
    // o for every pair while the gate loads are in flight
    u32 o[2][kGroups];
#pragma unroll
    for (int j = 0; j < kGroups; ++j) {
      const float2 ws = lds_f2(vws + 32 * j);
#pragma unroll
      for (int h = 0; h < 2; ++h)
        o[h][j] = cvt_bf16x2((d[4 * j + 2 * h] * as[h]) * ws.x,
                             (d[4 * j + 2 * h + 1] * as[h]) * ws.y);
    }
    // 128B swizzle: the thread's pair of column group j, row half h, sits at
    // sw[j % 8] + (j / 8) * 8192 + h * 1024 (row 16 w + r8 + 8 h, and (16 w + r8 + 8 h) % 8 == r8)
    const u32 rowbase = smem_addr(staging) + (16 * w + r8) * 128 + 4 * q4;
    u32 sw[8];
#pragma unroll
    for (int c = 0; c < 8; ++c) sw[c] = rowbase + ((c ^ r8) << 4);
#pragma unroll
    for (int box = 0; box < kGroups / 8; ++box) {
      u32 rv[2][8];  // the staged residual pairs of this box (zeros past M / N from the TMA box)
#pragma unroll
      for (int c = 0; c < 8; ++c)
#pragma unroll
        for (int h = 0; h < 2; ++h) rv[h][c] = lds_u32(sw[c] + box * 8192 + h * 1024);
#pragma unroll
      for (int c = 0; c < 8; ++c) {
        const int j = 8 * box + c;
#pragma unroll
        for (int h = 0; h < 2; ++h)
          sts_u32_if(sw[c] + box * 8192 + h * 1024,
                     add_bf16x2(rv[h][c], mul_bf16x2(gv[h][j], o[h][j])), valid[h]);
      }
    }
    store_staged<kAcc / 32>(staging, wg, row0, col0);
  }
  template <int kAcc>
  H3_DEVICE void operator()(float (&d)[kAcc], int row0, int col0, u8* staging, int wg) const {
    const int lane = threadIdx.x % 32, w = (threadIdx.x % 128) / 32, q4 = lane % 4;
    // Per row half h: the act scale, the gate row (row 0 for an invalid index: a legal address
    // whose values are unused; no address is formed from the invalid index) and the residual row.
    float as[2];
    bool in[2], valid[2];
    const bf16_t* grow[2];
    const bf16_t* rrow[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int row = row0 + 16 * w + lane / 4 + 8 * h;
      in[h] = row < M;
      as[h] = 0.f;
      if (!kAlpha && in[h]) as[h] = kLiveScale ? __ldcg(act_scale + row) : act_scale[row];
      i64 gi = -1;
      if (in[h])
        gi = index_is_64 ? static_cast<const i64*>(gate_index)[row]
                         : static_cast<const int*>(gate_index)[row];
      valid[h] = gi >= 0 && gi < rows;
      grow[h] = gate + (valid[h] ? gi : 0) * gate_stride;
      rrow[h] = residual + static_cast<i64>(in[h] ? row : 0) * N;
    }
    // NOTE: operands are loaded kBatch column groups at a time, all loads before any use: one
    // memory latency per batch (a load-use per group left ~48 exposed latencies per tile, SASS);
    // the weight scales are shared by both row halves. n224 (28 groups): batches of 4.
    constexpr int kBatch = (kAcc / 4) % 8 == 0 ? 8 : 4;
    static_assert((kAcc / 4) % kBatch == 0, "whole batches of column groups");
    static_assert(!kResTma || (kAcc / 4) % 8 == 0, "the residual prefetch: 64-column boxes");
#pragma unroll
    for (int j0 = 0; j0 < kAcc / 4; j0 += kBatch) {
      float2 ws[kBatch];
      u32 rv[2][kBatch], gv[2][kBatch];
#pragma unroll
      for (int t = 0; t < kBatch; ++t) {
        const int col = col0 + 8 * (j0 + t) + 2 * q4;
        ws[t] = !kAlpha && col < N ? *reinterpret_cast<const float2*>(w_scale + col)
                                   : make_float2(0.f, 0.f);
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const bool ok = in[h] && col < N;
          if constexpr (kResTma) {
            // zeros past M / N come with the TMA box (nothing is stored there)
            asm volatile("ld.shared.u32 %0, [%1];"
                         : "=r"(rv[h][t])
                         : "r"(staging_pair_addr(smem_addr(staging), j0 + t, h, w, lane))
                         : "memory");
          } else {
            rv[h][t] = ok ? *reinterpret_cast<const u32*>(rrow[h] + col) : 0u;
          }
          gv[h][t] = ok ? *reinterpret_cast<const u32*>(grow[h] + col) : 0u;
        }
      }
#pragma unroll
      for (int t = 0; t < kBatch; ++t)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int j = j0 + t;
          // the residual (zero past M / N, where nothing is stored), plus the gated product
          const float r0 = __uint_as_float(rv[h][t] << 16);
          const float r1 = __uint_as_float(rv[h][t] & 0xffff0000u);
          float v0 = r0, v1 = r1;
          if (valid[h]) {
            // o = bf16 pair in one cvt, bf16(gate * o) in one bf16x2 multiply (the rounding of
            // the exact product, as the reference's fp32 product rounded), the add in fp32
            const u32 o = kAlpha ? cvt_bf16x2(d[4 * j + 2 * h] * alpha,
                                              d[4 * j + 2 * h + 1] * alpha)
                                 : cvt_bf16x2((d[4 * j + 2 * h] * as[h]) * ws[t].x,
                                              (d[4 * j + 2 * h + 1] * as[h]) * ws[t].y);
            const u32 p = mul_bf16x2(gv[h][t], o);
            v0 = r0 + __uint_as_float(p << 16);
            v1 = r1 + __uint_as_float(p & 0xffff0000u);
          }
          d[4 * j + 2 * h] = v0;  // the store's bf16 conversion is the final rounding
          d[4 * j + 2 * h + 1] = v1;
        }
    }
    if constexpr (kResTma) {
      store_fragment_bf16_full(d, staging, wg, [&](int box, const u8* src) {
        const int x = col0 + 64 * box;
        if (x < N) tma_store_2d(desc_out, src, x, row0);
      });
    } else if constexpr ((kAcc / 4) % 8 == 0) {
      store_fragment_bf16(d, staging, wg, [&](int p, int box, const u8* src) {
        const int x = col0 + kPassCols * p + 64 * box;
        if (x < N) tma_store_2d(desc_out, src, x, row0);
      });
    } else {  // n224: 32-column boxes (desc_out has 32 x 64 boxes, 64B swizzle)
      store_fragment_bf16_w32(d, staging, wg, [&](int box, const u8* src) {
        const int x = col0 + 32 * box;
        if (x < N) tma_store_2d(desc_out, src, x, row0);
      });
    }
  }
};

// The single-launch form: the per-token FP8 of attn_out (or of y: the MLP's FC2), published per
// 128-row tile with a counter that the TMA producer waits on before the tile's first A load.
// * The rows that the first round of tiles reads (r0 of them, the engine's count) are quantized
//   by the consumer warps of the whole grid before their first tile: they idle until then, and
//   with 232 registers each keeps 14 loads per lane in flight. Measured: ~20 us for the 2048 rows
//   of a first round, then no tile waits (the spare warps alone had the first round wait
//   ~100 us at M = 4824, 1.28-1.45x the plain GEMM; benchmarks/NOTES.md session 7).
// * The rest by the three spare warps of every CTA's producer warpgroup, in increasing row order
//   across the grid (worker w of W takes rows r0 + w, r0 + w + W, ...), ahead of the tile order.
//   kSmemRows (the 192-column kernels, since session 22): a worker is a CTA's three spare warps
//   together, one row at a time, staged in a 14 KiB shared-memory buffer by a bulk copy (L2 ->
//   shared memory, no L1): the amax pass and the codes pass read the buffer, so the row crosses
//   L2 once (K = 7168; a K = 14336 row, the MLP's FC2, is two chunks, the first read twice) and
//   leaves L1 to the epilogue's gate rows. Without it (the 128-column kernels, M <= 256, where
//   the first round covers every row, and -DH3_FUSED_LDG_ROWS): each spare warp takes its own
//   rows, a pass for the amax (DRAM) and a pass for the codes (L1 / L2 hits).
// The counters and their memory order: h3/ready_rows.cuh (writers: the codes and the scale,
// then the row's count). Never deadlocks: the workers wait on nothing outside their CTA (the staged form's bulk copies
// and barriers are among its own three warps), and every CTA of the (persistent, fully
// resident) grid runs its workers whatever its tiles wait for.
template <bool kSmemRows>
struct ProQuantRowsFp8 : ReadyRows {  // tile_rows [ceil(M / 128)], zero at launch; M
  const bf16_t* __restrict__ src;     // attn_out [M, K]
  u8* act_q;                          // [M, K]
  float* act_scale;                   // [M]
  int K;

  // f(v, i) for this lane's 16-byte chunks i = 0..n-1 of a row (chunk i at src_row + 256 i),
  // kB loads in flight: whole batches run unpredicated, the remainder one load at a time (the
  // producer warps' 40 registers have no room for a predicate and an address per load).
  // NOTE: the row loads allocate in L1. Session 21 timed them not allocated
  // (ld.global.nc.L1::no_allocate, for the L1 hit rate Nsight Compute found at 7% against 59% on
  // quantized input): 3% / 5% slower at M = 4824 / 9648, the spare warps ~30% slower per row (the
  // codes pass re-reads part of the row from L1).
  template <int kB, bool kEvict, class F>
  H3_DEVICE static void each_chunk(const bf16_t* src_row, int n, const F& f) {
    int i = 0;
#pragma unroll 1
    for (; i + kB <= n; i += kB) {
      const bf16_t* p = src_row + 256 * i;
      uint4 v[kB];
#pragma unroll
#ifdef H3_FUSED_EVICT
      for (int u = 0; u < kB; ++u) v[u] = kEvict ? ld16_stream(p + 256 * u) : ld16(p + 256 * u);
#else
      for (int u = 0; u < kB; ++u) v[u] = ld16(p + 256 * u);
#endif
#pragma unroll
      for (int u = 0; u < kB; ++u) f(v[u], i + u);
    }
#pragma unroll 1
    for (; i < n; ++i) f(ld16(src_row + 256 * i), i);
  }

  // Row r by the calling warp, kU (amax pass) / kV (codes pass) loads per lane in flight; K is a
  // multiple of 256 (one 16-byte load per lane covers 256 values).
  // The amax pass keeps the bf16 magnitudes packed (bf16x8_absmax_u16x2, one redux.sync for the
  // warp) and the codes pass puts each code's sign back from the bf16 sign bytes
  // (fp8_codes_x8_bf16): ~25% fewer instructions than an unpack, fmax and copysign per element,
  // measured level in time with those (benchmarks/NOTES.md session 19; that form is at commit
  // 83608ed). A row holding a NaN gets a NaN scale and NaN codes, as formats.py gives.
  template <int kU, int kV>
  H3_DEVICE void row(int r) const {
    const int lane = threadIdx.x % 32, n = K / 256;
    const bf16_t* src_row = src + static_cast<i64>(r) * K + 8 * lane;
    u32 m2 = 0;
    each_chunk<kU, false>(src_row, n, [&](uint4 v, int) { m2 = bf16x8_absmax_u16x2(m2, v); });
    const u32 mb = warp_max_u32(max(m2 & 0xffffu, m2 >> 16));
    const float sc = fp8_scale_from_amax(__uint_as_float(mb << 16)), rcp = __frcp_rn(sc);
    u8* qrow = act_q + static_cast<i64>(r) * K + 8 * lane;
    each_chunk<kV, true>(src_row, n, [&](uint4 v, int i) {
      *reinterpret_cast<uint2*>(qrow + 256 * i) = fp8_codes_x8_bf16(v, sc, rcp);
    });
    publish(r, sc);
  }

  // Row r's scale, then its counter (ReadyRows::count_row). `leader`: the one thread of the
  // row's workers that stores and counts; `sync`: the workers' barrier.
  template <class Sync>
  H3_DEVICE void publish(int r, float sc, bool leader, const Sync& sync) const {
    if (leader) act_scale[r] = sc;
    count_row(r, leader, sync);
  }
  H3_DEVICE void publish(int r, float sc) const {
    publish(r, sc, threadIdx.x % 32 == 0, [] { __syncwarp(); });
  }

  // Loads per lane per batch. Spare warps (40 registers; a 56 / 224 split measured 4.6% slower
  // consumers, NOTES.md session 7): 7 / 2, both dividing 7168 / 256 and 14336 / 256; 14 / 7
  // (measured) made the CI toolchain's ptxas keep the consumers' tile index in local memory.
  static constexpr int kSpareU = 7, kSpareV = 2, kConsU = 14, kConsV = 14;

#ifdef H3_FUSED_PREGS
  static constexpr int kProducerRegs = H3_FUSED_PREGS;
#endif

  // kSmemRows: the engine's hook area (ProducerSmem): [0, 8) the mbarrier the bulk copies
  // complete on, [16, 28) the three warps' amax words, [32, 32 + kRowBufBytes) the row buffer.
  // 14 KiB fits beside the 192-column FP8 kernels' four-stage ring (15 KiB were free).
  static constexpr int kRowBufBytes = 14336;  // a K = 7168 row of bf16
  static constexpr int kSmemBytes = kSmemRows ? 32 + kRowBufBytes : 0;
  static constexpr int kSpareBar = 8;  // the spare warps' hardware barrier (96 threads)

  // The staged form's row loop (see the struct's comment), threads 32..127 of the CTA.
  H3_DEVICE void spare_staged(int r0, u8* smem) const {
    constexpr int kChunks = kRowBufBytes / 16;  // 16-byte chunks (8 values) per buffer load
    const int tid = threadIdx.x - 32, lane = threadIdx.x % 32, n16 = K / 8;
    const int last0 = (n16 - 1) / kChunks * kChunks;  // the row's last chunk starts here
    u64* bar = reinterpret_cast<u64*>(smem);
    const u32 red = smem_addr(smem + 16), buf = smem_addr(smem + 32);
    u32 phase = 0;
    // chunk c0.. of row `srow` into the buffer (the caller made sure nobody still reads it)
    auto load = [&](const bf16_t* srow, int c0) {
      if (tid == 0) {
        const u32 bytes = 16 * min(kChunks, n16 - c0);
        mbar_arrive_expect_tx(bar, bytes);
        bulk_load(smem + 32, srow + 8 * c0, bytes, bar);
      }
      mbar_wait(bar, phase);
      phase ^= 1;
    };
    [[maybe_unused]] u64 t0 = 0;
    [[maybe_unused]] int rows_done = 0;
    H3_PROBE_NOW(t0);
    for (int r = r0 + blockIdx.x; r < M; r += gridDim.x) {
      const bf16_t* srow = src + static_cast<i64>(r) * K;
      u32 m2 = 0;
      for (int c0 = 0;; c0 += kChunks) {
        load(srow, c0);
        const int nc = min(kChunks, n16 - c0);
        for (int c = tid; c < nc; c += 96) m2 = bf16x8_absmax_u16x2(m2, lds_u128(buf + 16 * c));
        if (c0 == last0) break;
        named_barrier_sync(kSpareBar, 96);  // every read of this chunk is done
      }
      u32 mb = warp_max_u32(max(m2 & 0xffffu, m2 >> 16));
      if (lane == 0) sts_u32(red + 4 * (tid / 32), mb);
      named_barrier_sync(kSpareBar, 96);
      mb = max(lds_u32(red), max(lds_u32(red + 4), lds_u32(red + 8)));
      const float sc = fp8_scale_from_amax(__uint_as_float(mb << 16)), rcp = __frcp_rn(sc);
      u8* qrow = act_q + static_cast<i64>(r) * K;
      auto codes = [&](int c0) {
        const int nc = min(kChunks, n16 - c0);
        for (int c = tid; c < nc; c += 96)
          *reinterpret_cast<uint2*>(qrow + 8 * (c0 + c)) =
              fp8_codes_x8_bf16(lds_u128(buf + 16 * c), sc, rcp);
      };
      codes(last0);  // the last chunk is still in the buffer
      for (int c0 = 0; c0 < last0; c0 += kChunks) {
        named_barrier_sync(kSpareBar, 96);
        load(srow, c0);
        codes(c0);
      }
      // (the barrier also frees the buffer and the amax words for the next row)
      publish(r, sc, tid == 0, [] { named_barrier_sync(kSpareBar, 96); });
      ++rows_done;
    }
    probe_spare(tid == 0, t0, rows_done);  // (a worker: three warps)
  }

  H3_DEVICE void spare(int w, int r0, [[maybe_unused]] u8* smem) const {
#if defined(H3_FUSED_NOSPARE) || defined(H3_FUSED_IDLESPARE)
    return;
#endif
    if constexpr (kSmemRows) {
      spare_staged(r0, smem);
      return;
    }
    spare_warp_rows(w, r0, [&](int r, int) { row<kSpareU, kSpareV>(r); });
  }

  H3_DEVICE void consumers(int worker, int workers, int r0) const {
    [[maybe_unused]] u64 t0 = 0, t1 = 0;
    H3_PROBE_NOW(t0);
#ifdef H3_FUSED_NOSPARE
    r0 = M;
#endif
    // NOTE: session 21 timed these rows held whole in registers (one round trip instead of the two
    // passes' four batches, at K = 7168): the first round 9.8 against 10.8 us and the wait per
    // CTA 6.0 against 8.3 us, but the kernel level (0.3131 / 0.3137 ms at M = 4824); nor did
    // grouping the tile order by 3 M-tile pairs (768 first-round rows instead of 2048) help.
    for (int r = worker; r < r0; r += workers) row<kConsU, kConsV>(r);
    H3_PROBE_NOW(t1);
    if (threadIdx.x % 32 == 0) H3_PROBE_MAX(7, t1 - t0);  // [7]: the consumers' longest
  }
};

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define H3_CLUSTER_X2 __cluster_dims__(2, 1, 1)
#else
#define H3_CLUSTER_X2
#endif

#define H3_OP_PARAMS                                                                         \
  const __grid_constant__ TmaDesc desc_a, const __grid_constant__ TmaDesc desc_b,            \
      const __grid_constant__ TmaDesc desc_out, const __grid_constant__ TmaDesc desc_res,    \
      int M, int N, int k_bytes,                                                             \
      const float *act_scale, const float *__restrict__ w_scale,                             \
      const bf16_t *residual, const bf16_t *__restrict__ gate, long long gate_stride,         \
      long long rows, const void *__restrict__ gate_index, int index_is_64, float *tail_part, \
      u32 *tail_count, int tail_splits

#define H3_OP_EPI(LIVE, VEC)                                                             \
  const EpiGatedResidual<LIVE, false, true, VEC> epi {                                   \
    act_scale, w_scale, residual, gate, gate_stride, rows, gate_index, index_is_64, M, N, \
        &desc_out, 1.f, &desc_res                                                        \
  }

// The single-launch forms' producer hook: attn_out quantized by the spare producer warps
// (ProQuantRowsFp8); the two-launch forms' none (act_q comes from a quantization launch).
#define H3_OP_FUSED_PARAMS                                                              \
  H3_OP_PARAMS, const bf16_t *__restrict__ attn_out, u8 *act_q, u32 *tile_rows
#define H3_OP_PRO(SMEM)                                                             \
  const ProQuantRowsFp8<SMEM> pro {                                                 \
    {tile_rows, M}, attn_out, act_q, const_cast<float*>(act_scale), k_bytes         \
  }
#define H3_OP_NO_PRO const NoProducerHooks pro {}
// The 192-column single-launch kernels stage the spare warps' rows in shared memory
// (ProQuantRowsFp8's kSmemRows); -DH3_FUSED_LDG_ROWS: the form before session 22, for
// scripts/probe_fused.py's A/B (the host's shared-memory size covers both).
#ifdef H3_FUSED_LDG_ROWS
#define H3_FUSED_SMEM_ROWS false
#else
#define H3_FUSED_SMEM_ROWS true
#endif

// One FP8 out_proj kernel: 128 x BN tiles in clusters of CLUSTER CTAs (CLUSTER_ATTR its
// __cluster_dims__), VEC bytes of epilogue vectors per warpgroup, LIVE: the activation scales
// written in the launch (the single-launch form, PRO_T = ProQuantRowsFp8).
#define H3_OP_KERNEL(NAME, CLUSTER_ATTR, CLUSTER, BN, VEC, LIVE, PARAMS, PRO_T, PRO)           \
  __global__ void CLUSTER_ATTR __launch_bounds__(384, 1) NAME(PARAMS) {                         \
    H3_OP_EPI(LIVE, VEC);                                                                       \
    PRO;                                                                                        \
    gemm_sm90_body<1, BN, kOpsFp8Promote, CLUSTER, EpiGatedResidual<LIVE, false, true, VEC>,    \
                   false, PRO_T, 2, false, true>(desc_a, desc_b, M, N, k_bytes, epi, pro, 1,    \
                                                 {tail_part, tail_count, tail_splits});         \
  }

// M > 256: 128 x 192 tiles, in clusters of two multicasting B (gemm.fp8_ops_cluster(M) = 2: the
// default from M = 16384 on) or on single CTAs (1, the default below); M <= 256: 128 x 128 tiles
// on single CTAs. Two-launch forms, then the single-launch ones.
H3_OP_KERNEL(out_proj_fp8_x2_sm90, H3_CLUSTER_X2, 2, 192, H3_EPI_VEC(192), false, H3_OP_PARAMS,
             NoProducerHooks, H3_OP_NO_PRO)
H3_OP_KERNEL(out_proj_fp8_n192_sm90, , 1, 192, H3_EPI_VEC(192), false, H3_OP_PARAMS,
             NoProducerHooks, H3_OP_NO_PRO)
H3_OP_KERNEL(out_proj_fp8_sm90, , 1, 128, 0, false, H3_OP_PARAMS, NoProducerHooks, H3_OP_NO_PRO)
H3_OP_KERNEL(out_proj_fp8_fused_x2_sm90, H3_CLUSTER_X2, 2, 192, H3_EPI_VEC(192), true,
             H3_OP_FUSED_PARAMS, ProQuantRowsFp8<H3_FUSED_SMEM_ROWS>,
             H3_OP_PRO(H3_FUSED_SMEM_ROWS))
H3_OP_KERNEL(out_proj_fp8_fused_n192_sm90, , 1, 192, H3_EPI_VEC(192), true, H3_OP_FUSED_PARAMS,
             ProQuantRowsFp8<H3_FUSED_SMEM_ROWS>, H3_OP_PRO(H3_FUSED_SMEM_ROWS))
H3_OP_KERNEL(out_proj_fp8_fused_sm90, , 1, 128, 0, true, H3_OP_FUSED_PARAMS,
             ProQuantRowsFp8<false>, H3_OP_PRO(false))

#undef H3_OP_KERNEL
#undef H3_OP_NO_PRO
#undef H3_OP_PRO

// minimax_h3_nvfp4_out_proj's Hopper path (sm_90a): the bf16 engine over the dequantized
// operands a' = e2m1 * sf_a, w' = e2m1 * sf_w (exact in bf16: quantize.cu's
// nvfp4_dequant_bf16_smxx), o = bf16(acc * alpha) with alpha formed on the device, the gated
// residual; tiles as the bf16 GEMM's defaults (128 x 256 or, where it fills the last wave better,
// 128 x 224 in clusters of two; 128 x 128 alone).
// Verified on the H200 (2026-12-01): the sm_90a default.
#define H3_OPNV_PARAMS                                                                        \
  const __grid_constant__ TmaDesc desc_a, const __grid_constant__ TmaDesc desc_b,            \
      const __grid_constant__ TmaDesc desc_out, int M, int N, int k_bytes,                   \
      const float *__restrict__ ga_ptr, const float *__restrict__ gw_ptr, float gw_host,     \
      const bf16_t *residual, const bf16_t *__restrict__ gate, long long gate_stride,         \
      long long rows, const void *__restrict__ gate_index, int index_is_64

#define H3_OPNV_EPI                                                                           \
  const EpiGatedResidual<false, true> epi {                                                   \
    nullptr, nullptr, residual, gate, gate_stride, rows, gate_index, index_is_64, M, N,       \
        &desc_out, Nvfp4Alpha{nullptr, ga_ptr, gw_ptr, gw_host, 0.f}.get()                    \
  }

__global__ void H3_CLUSTER_X2 __launch_bounds__(384, 1) out_proj_nvfp4_wg_x2_sm90(H3_OPNV_PARAMS) {
  H3_OPNV_EPI;
  gemm_sm90_body<0, 256, 0, 2>(desc_a, desc_b, M, N, k_bytes, epi);
}

// n224 (the output map in 32-column boxes): N = 5376 at M = 4824 runs 7 rounds of n256 tile pairs
// for 6.05 rounds of work, 7 of n224 for 6.9 (gemm.bf16_tile_n).
__global__ void H3_CLUSTER_X2 __launch_bounds__(384, 1)
    out_proj_nvfp4_wg_n224_x2_sm90(H3_OPNV_PARAMS) {
  H3_OPNV_EPI;
  gemm_sm90_body<0, 224, 0, 2>(desc_a, desc_b, M, N, k_bytes, epi);
}

__global__ void __launch_bounds__(384, 1) out_proj_nvfp4_wg_sm90(H3_OPNV_PARAMS) {
  H3_OPNV_EPI;
  gemm_sm90_body<0, 128, 0, 1>(desc_a, desc_b, M, N, k_bytes, epi);
}

// The NVFP4 out_proj's single-launch forms (sm_90a, the default there): attn_out's NVFP4
// quantization runs inside the bf16 GEMM launch that reads it, as the FP8 op's does
// (ProQuantRowsFp8): the consumer warps quantize the first round's rows before their first tile,
// the three spare producer warps of every CTA the rest, ahead of the tile order, and each row is
// published on its 128-row tile's counter (h3/ready_rows.cuh), on which the TMA producer waits.
// A row is one pass: a warp-wide load covers 256 values, 8 per lane, and a 16-value block is two
// adjacent lanes' values (the pair's amax by one shuffle), so each row crosses L2 once. Per row
// it writes the codes into act_q, the linear scales into act_sf (both bit-identical to
// quantize.cu's fp4_quantize_smxx: the same nvfp4_scale / nvfp4_codes_x8 on the same block
// amax) and a' = e2m1 * sf (exact in bf16, quantize.cu's nvfp4_dequant_bf16_smxx) into a_bf, the
// engine's A operand. A block holding a NaN gets sf 0x7f, so its a' values decode to NaN, as in
// the two-launch form. The weight's w' is a launch of its own before this one.
struct ProQuantRowsNvfp4 : ReadyRows {  // tile_rows [ceil(M / 128)], zero at launch; M
  const bf16_t* __restrict__ src;       // attn_out [M, K]
  u8* act_q;                            // [M, K / 2]
  u8* act_sf;                           // [M, K / 16], linear
  bf16_t* a_bf;                         // [M, K]
  const float* __restrict__ g_ptr;      // the activation's global scale, fp32 [1]
  int K;

  // Row r by the calling warp, kB loads per lane in flight (K a multiple of 256); the row
  // `next` (when below M) prefetched into L2 first.
  // NOTE: a spare warp has room for one 16-byte load per lane in flight (two spilled 12 bytes of
  // the 40-register budget), so a row is 28 dependent DRAM round trips; the prefetch of the
  // worker's next row (no registers held) lets them hit L2 instead.
  template <int kB>
  H3_DEVICE void row(int r, float g, int next) const {
    const int lane = threadIdx.x % 32, n = K / 256;
    if (next < M) {
      const char* p = reinterpret_cast<const char*>(src + static_cast<i64>(next) * K);
      for (int b = 128 * lane; b < 2 * K; b += 4096)
        asm volatile("prefetch.global.L2 [%0];" ::"l"(p + b));
    }
    const i64 off = static_cast<i64>(r) * K + 8 * lane;  // this lane's first value of the row
    ProQuantRowsFp8<false>::each_chunk<kB, false>(src + off, n, [&](uint4 v, int i) {
      const u32 m2 = bf16x8_absmax_u16x2(0u, v);
      u32 mb = max(m2 & 0xffffu, m2 >> 16);
      mb = max(mb, __shfl_xor_sync(0xffffffffu, mb, 1));  // the block's other half
      const Nvfp4Scale sc = nvfp4_scale(__uint_as_float(mb << 16), g);
      float f[8];
      unpack_bf16x8(v, f);
      const u32 codes = nvfp4_codes_x8(f, sc.os);
      *reinterpret_cast<u32*>(act_q + off / 2 + 128 * i) = codes;
      if (!(lane & 1)) act_sf[static_cast<i64>(r) * (K / 16) + 16 * i + lane / 2] = sc.sf;
#ifndef H3_FUSED_NOAPRIME  // (timing only: the engine then reads an earlier call's a')
      st16(a_bf + off + 256 * i, e2m1x8_scaled_bf16x8(codes, e4m3_to_bf16x2(sc.sf)));
#endif
    });
    count_row(r, lane == 0, [] { __syncwarp(); });
  }

  H3_DEVICE void spare(int w, int r0, u8*) const {
#if defined(H3_FUSED_NOSPARE) || defined(H3_FUSED_IDLESPARE)
    return;
#endif
    const float g = *g_ptr;
    spare_warp_rows(w, r0, [&](int r, int next) { row<1>(r, g, next); });
  }

  H3_DEVICE void consumers(int worker, int workers, int r0) const {
    [[maybe_unused]] u64 t0 = 0, t1 = 0;
    H3_PROBE_NOW(t0);
#ifdef H3_FUSED_NOSPARE
    r0 = M;
#endif
    const float g = *g_ptr;
    for (int r = worker; r < r0; r += workers) row<7>(r, g, M);  // (no prefetch)
    H3_PROBE_NOW(t1);
    if (threadIdx.x % 32 == 0) H3_PROBE_MAX(7, t1 - t0);  // [7]: the consumers' longest
  }
};

#define H3_OPNV_FUSED(NAME, CLUSTER_ATTR, CLUSTER, BN)                                        \
  __global__ void CLUSTER_ATTR __launch_bounds__(384, 1)                                      \
      NAME(H3_OPNV_PARAMS, const bf16_t* __restrict__ attn_out, u8* act_q, u8* act_sf,        \
           bf16_t* a_bf, u32* tile_rows) {                                                    \
    H3_OPNV_EPI;                                                                              \
    const ProQuantRowsNvfp4 pro{{tile_rows, M}, attn_out, act_q, act_sf, a_bf, ga_ptr,        \
                                k_bytes / 2};                                                 \
    gemm_sm90_body<0, BN, 0, CLUSTER, EpiGatedResidual<false, true>, false, ProQuantRowsNvfp4>( \
        desc_a, desc_b, M, N, k_bytes, epi, pro);                                             \
  }

H3_OPNV_FUSED(out_proj_nvfp4_wg_fused_x2_sm90, H3_CLUSTER_X2, 2, 256)
H3_OPNV_FUSED(out_proj_nvfp4_wg_fused_n224_x2_sm90, H3_CLUSTER_X2, 2, 224)
H3_OPNV_FUSED(out_proj_nvfp4_wg_fused_sm90, , 1, 128)

#undef H3_OPNV_FUSED
#undef H3_OPNV_EPI
#undef H3_OPNV_PARAMS

// The gated residual in the mma.sync fragment layout (the NVFP4 op, and the FP8 op on the
// mma.sync back end): o = Scale (bf16-rounded in place: MmaYAlpha, o = bf16(acc * alpha), or
// MmaYRowCol, o = bf16((acc * act_scale[m]) * w_scale[n])); out = bf16(residual + bf16(gate[i] *
// o)), or residual exactly on invalid rows. Per row, the residual and gate words of the warp's 8
// column groups are loaded before any is used. Stores are bf16 pairs.
template <class Scale>
struct EpiMmaGatedResidual {
  Scale scale;
  const bf16_t* residual;               // [M, N] (may alias out)
  const bf16_t* __restrict__ gate;      // [rows, N], row stride gate_stride
  i64 gate_stride, rows;
  const void* __restrict__ gate_index;  // int32 / int64 [M]
  int index_is_64, M, N;
  bf16_t* out;

  H3_DEVICE void operator()(float (&acc)[4][8][4], int row0, int col0, int wm, int wn,
                            u8* /*scratch*/) const {
    const int lane = threadIdx.x % 32;
    scale(acc, row0, col0, wm, wn);
#pragma unroll
    for (int mi = 0; mi < 4; ++mi)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int row = row0 + wm + mi * 16 + mma_c_row(lane, 2 * h);
        if (row >= M) continue;
        const i64 gi = index_is_64 ? static_cast<const i64*>(gate_index)[row]
                                   : static_cast<const int*>(gate_index)[row];
        const bool valid = gi >= 0 && gi < rows;  // the guard: no address from an invalid index
        const bf16_t* grow = gate + (valid ? gi : 0) * gate_stride;
        const bf16_t* rrow = residual + static_cast<i64>(row) * N;
        bf16_t* orow = out + static_cast<i64>(row) * N;
        u32 rv[8], gv[8];
#pragma unroll
        for (int ni = 0; ni < 8; ++ni) {
          const int col = col0 + wn + ni * 8 + mma_c_col(lane, 2 * h);
          rv[ni] = col < N ? *reinterpret_cast<const u32*>(rrow + col) : 0u;
          gv[ni] = col < N ? *reinterpret_cast<const u32*>(grow + col) : 0u;
        }
#pragma unroll
        for (int ni = 0; ni < 8; ++ni) {
          const int col = col0 + wn + ni * 8 + mma_c_col(lane, 2 * h);
          if (col >= N) continue;
          u32 res = rv[ni];
          if (valid) {
            const float v0 = __uint_as_float(rv[ni] << 16) +
                             round_bf16(__uint_as_float(gv[ni] << 16) * acc[mi][ni][2 * h]);
            const float v1 = __uint_as_float(rv[ni] & 0xffff0000u) +
                             round_bf16(__uint_as_float(gv[ni] & 0xffff0000u) * acc[mi][ni][2 * h + 1]);
            res = pack_bf16x2(f32_to_bf16(v0), f32_to_bf16(v1));
          }
          *reinterpret_cast<u32*>(orow + col) = res;
        }
      }
  }
};

// minimax_h3_nvfp4_out_proj (SPEC.md section 5): the NVFP4 GEMM (h3/gemm_nvfp4.cuh: native
// block-scaled MMA on sm_120a, exact bf16 emulation elsewhere), o = bf16(acc * alpha) with
// alpha = 1 / (g_act * g_w) formed on the device, and the gated residual.
__global__ void __launch_bounds__(kMtThreads, 1) out_proj_nvfp4_smxx(
    const __grid_constant__ TmaDesc desc_a, const __grid_constant__ TmaDesc desc_b,
    const __grid_constant__ TmaDesc desc_sfa, const u8* __restrict__ sfb, int sfb_c4, int M,
    int N, int k_bytes, const float* __restrict__ ga_ptr, const float* __restrict__ gw_ptr,
    float gw_host, const bf16_t* residual, const bf16_t* __restrict__ gate, long long gate_stride,
    long long rows, const void* __restrict__ gate_index, int index_is_64, bf16_t* out) {
  const float alpha = Nvfp4Alpha{nullptr, ga_ptr, gw_ptr, gw_host, 0.f}.get();
  const EpiMmaGatedResidual<MmaYAlpha> epi{{alpha}, residual,    gate, gate_stride, rows,
                                           gate_index, index_is_64, M,    N,           out};
  gemm_nvfp4_body<EpiMmaGatedResidual<MmaYAlpha>, kNvSm120Stages, 0, kNvSm120BK>(
      desc_a, desc_b, desc_sfa, sfb, sfb_c4, M, N, k_bytes, epi);
}

// minimax_h3_fp8_out_proj on the mma.sync back end (the sm_120a path; also runs on sm_90a): the
// FP8 GEMM on the TMA-fed mma.sync skeleton (h3/gemm_mma_tma.cuh; fp32 accumulation in the MMA,
// no promotion step) over the act_q / act_scale of the quantization launch, the gated residual.
// kFmt 1: legacy e4m3 mma.sync; 2: kind::mxf8f6f4 with unit scales (sm_120a only).
template <int kFmt>
__global__ void __launch_bounds__(kMtThreads, 1) out_proj_fp8_mma_smxx(
    const __grid_constant__ TmaDesc desc_a, const __grid_constant__ TmaDesc desc_b, int M, int N,
    int k_bytes, const float* __restrict__ act_scale, const float* __restrict__ w_scale,
    const bf16_t* residual, const bf16_t* __restrict__ gate, long long gate_stride, long long rows,
    const void* __restrict__ gate_index, int index_is_64, bf16_t* out) {
  using Epi = EpiMmaGatedResidual<MmaYRowCol>;
  const Epi epi{
      {act_scale, w_scale, M, N}, residual, gate, gate_stride, rows, gate_index, index_is_64, M, N,
      out};
  gemm_mma_tma_body<kFmt, Epi, false, MtSm120>(desc_a, desc_b, M, N, k_bytes, epi);
}
#undef H3_OP_FUSED_PARAMS
#undef H3_OP_EPI

#undef H3_OP_PARAMS

}  // namespace h3
