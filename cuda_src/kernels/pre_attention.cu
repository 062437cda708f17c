// minimax_h3_bf16_pre_attention, launch 2 of 2 (SPEC.md section 3): the QKV GEMM on the sm_90a
// engine with the pre-attention epilogue. Launch 1 is the prologue (prologue.cu) writing `a`; the
// single-launch kernels (_fused, ProNormRowsBf16 = h3/norm_rows.cuh's ProNormRows<false>) write
// `a` themselves.
//
// Columns are in engine order [kind, head, dim] (kind 0 Q, 1 K, 2 V; 56 heads of 128), so a
// 128-column slice of a tile is exactly one (kind, head). Per row and head of Q and K:
//   r = bf16(acc);  rstd = rsqrt(sum r^2 / 128 + qk_eps);  n_d = bf16((r_d * rstd) * g_d)
//   d < 48:  out_d = bf16(fma(n_d, c, -(n_{d+48} * s))),  out_{d+48} = bf16(fma(n_{d+48}, c, n_d * s))
//   (c = cs[p, d], s = cs[p, 48 + d], p = clamp(pos[m], 0, S - 1); bf16 x bf16 products are exact
//   in fp32, so each output has one fp32 and one bf16 rounding), dims [96, 128) = n_d;
// V = bf16(acc). An invalid AdaLN index made the row of `a` zero, so its outputs are zero too.
// Thread (warp w, lane l) of a consumer warpgroup holds, for each of its two rows, columns
// 8j + 2(l % 4) + {0, 1}: 32 of a head's 128 values; the other 96 are in the three other lanes of
// its quad (two shuffles finish the sum of squares), and RoPE partners d and d + 48 (j and j + 6)
// are in the same thread.
// Output: the destination-major Ulysses pack out[P, M, hp, 3, 128], hp = 56 / P, written by TMA
// through a 3-D tensor map (x = hp * 384 columns, y = M rows, z = P) in 64 x 64 x 1 boxes, which
// clips rows past M inside each destination slice.
#include "h3/adaln.cuh"
#include "h3/gemm_mma_tma.cuh"
#include "h3/gemm_sm90.cuh"
#include "h3/norm_rows.cuh"
#include "h3/numeric.cuh"
#include "h3/pre_attention.cuh"
#include "h3/ready_rows.cuh"
#include "h3/reduce.cuh"

namespace h3 {

// The BF16 op's epilogue: the math, then the Ulysses pack. Head hd of the tile goes to destination
// head / hp, slot head % hp, kind, dims 64 * box ...
// kHeads (pre_attention.BF16_EPILOGUE = "heads", 256-column tiles): one head at a time, so that
// head 0's store pass (its TMA store reading the staging buffer) runs while head 1's math does
// and pass 1's wait for pass 0's reads finds them done; the default ("rows") runs both heads'
// math first, row half by row half, then both store passes.
// Timing-only diagnostic (scripts/probe_engine.py --ab panomath; never set by the ops):
// -DH3_PA_NOMATH skips the RMSNorm and RoPE (wrong outputs: what the math costs the tile).
// -DH3_PA_CS_PREFETCH (probe_engine.py --ab paprefetch, the same bytes): before each unit's
// mainloop every thread asks L1 for its two rows' RoPE cache lines (prefetch.global.L1, no
// registers held across the mainloop), so that the epilogue's operand loads may hit L1; through
// the engine's prefetch_vec hook with a 16-byte vector area (the ring keeps its four stages).
// Only the single launch is timed with it (the two-launch kernels spill 16 bytes in that build).
template <bool kHeads = false>
struct EpiPreAttnBf16 {
  PreAttnMath math;
  const TmaDesc* desc_out;

#ifdef H3_PA_CS_PREFETCH
  static constexpr int kVecBytes = 16;
  template <int kBN>
  H3_DEVICE void prefetch_vec(int row0, int col0, u8*) const {
    const int lane = threadIdx.x % 32, w = (threadIdx.x % 128) / 32, q4 = lane % 4;
    if (col0 / kPaKindCols >= 2 || q4 >= 2) return;  // V: no operands; lanes 0, 1 of a quad
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      // the row's 192 cache bytes span two 128-byte lines from its start (q4 = 0) and 128 on
      const int pos = math.position(row0 + 16 * w + lane / 4 + 8 * h);
      const bf16_t* p = math.cs + static_cast<i64>(pos) * 96 + 64 * q4;
      asm volatile("prefetch.global.L1 [%0];" ::"l"(p));
    }
  }
  template <int kAcc>
  H3_DEVICE void operator()(float (&d)[kAcc], int row0, int col0, u8* staging, int wg,
                            u8*) const {
    (*this)(d, row0, col0, staging, wg);
  }
#endif

  // The TMA store of 64-column box `box` of head `head` (of `kind`) at rows row0..
  H3_DEVICE void store_box(int kind, int head, int box, int row0, const u8* src) const {
    const int hp = math.hp;
    tma_store_3d(desc_out, src, (head % hp) * 384 + kind * kPaHeadDim + 64 * box, row0, head / hp);
  }

  template <int kAcc>
  H3_DEVICE void operator()(float (&d)[kAcc], int row0, int col0, u8* staging, int wg) const {
    int p[2];
    PaOperands o;
    math.positions(row0, p);
    if constexpr (kHeads) {
      static_assert(kAcc == 128 && kStagingBoxes == 2, "two heads, one 128-column pass each");
      const int kind = col0 / kPaKindCols, head0 = (col0 % kPaKindCols) / kPaHeadDim;
      auto store = [&](int hd, int box, const u8* src) {
        store_box(kind, head0 + hd, box, row0, src);
      };
      math.template apply<false, 2, 0, kPaPack>(d, col0, o, p);
      store_fragment_bf16<kAcc, decltype(store), kStagingBoxes, true, 0, 1, kPaPack>(
          d, staging, wg, store);
      math.template apply<false, 2, 1, kPaPack>(d, col0, o, p);
      store_fragment_bf16<kAcc, decltype(store), kStagingBoxes, true, 1, 2, kPaPack>(
          d, staging, wg, store);
      return;
    }
    // Each row's RoPE operands are loaded at the start of its math (kLoad = 2). Loading the
    // second row's during the first row's math (kLoad = 1, as the FP8 kernels) left 24 bytes in
    // local memory once the engine's loop state moved to uniform registers (session 20); loaded
    // with the first, ptxas spilled 72. -DH3_T_CARRIED (diagnostic) restores the kLoad = 1 form
    // with the engine's carried tile index.
#if defined(H3_PA_NOMATH)
    (void)o;
    (void)p;
#elif !defined(H3_T_CARRIED)
    math.template apply<false, 2, -1, kPaPack>(d, col0, o, p);
#else
    math.load_half(o, p, col0, 0);
    math.template apply<false, 1, -1, kPaPack>(d, col0, o, p);
#endif
    const int kind = col0 / kPaKindCols, head0 = (col0 % kPaKindCols) / kPaHeadDim;
    auto store = [&](int hd, int box, const u8* src) {
      store_box(kind, head0 + hd, box, row0, src);
    };
    store_fragment_bf16<kAcc, decltype(store), kStagingBoxes, true, 0, -1, kPaPack>(d, staging,
                                                                                    wg, store);
  }
};

// The BF16 op's epilogue on the mma.sync back end: the math, then bf16 pairs into the pack.
template <int kScratch>
struct EpiMmaPreAttnBf16 {
  MmaPreAttnMath math;
  int hp;
  bf16_t* __restrict__ out;

  H3_DEVICE void operator()(float (&acc)[4][8][4], int row0, int col0, int wm, int wn,
                            u8* scratch) const {
    math.template apply<kScratch>(acc, row0, col0, wm, wn, scratch);
    const int lane = threadIdx.x % 32, q4 = lane % 4, M = math.M;
    const int kind = col0 / kPaKindCols;
    const int head = (col0 % kPaKindCols) / kPaHeadDim + wn / kPaHeadDim;
    const int half = (wn / 64) % 2;
    // Store bf16 pairs into the pack out[head / hp, m, head % hp, kind, d].
    bf16_t* base = out + (static_cast<i64>(head / hp) * M) * (hp * 384) + (head % hp) * 384 +
                   kind * kPaHeadDim + 64 * half + 2 * q4;
#pragma unroll
    for (int mi = 0; mi < 4; ++mi)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int row = row0 + wm + 16 * mi + lane / 4 + 8 * h;
        if (row >= M) continue;
        bf16_t* dst = base + static_cast<i64>(row) * (hp * 384);
#pragma unroll
        for (int ni = 0; ni < 8; ++ni)
          *reinterpret_cast<u32*>(dst + 8 * ni) =
              pack_bf16x2(f32_to_bf16(acc[mi][ni][2 * h]), f32_to_bf16(acc[mi][ni][2 * h + 1]));
      }
  }
};

__global__ void __launch_bounds__(kMtThreads, 1) pre_attention_bf16_mma_smxx(
    const __grid_constant__ TmaDesc desc_a, const __grid_constant__ TmaDesc desc_b, int M,
    int k_bytes, const bf16_t* __restrict__ q_w, const bf16_t* __restrict__ k_w,
    const bf16_t* __restrict__ cs, int cs_rows, const void* __restrict__ pos, int pos_is_64,
    float qk_eps, int hp, bf16_t* __restrict__ out) {
  using Epi = EpiMmaPreAttnBf16<MtSm120Scratch::kScratch>;
  const Epi epi{{q_w, k_w, cs, pos, pos_is_64, cs_rows, M, qk_eps}, hp, out};
  gemm_mma_tma_body<0, Epi, false, MtSm120Scratch>(desc_a, desc_b, M, 3 * kPaKindCols, k_bytes, epi);
}

// The single-launch form (pre_attention.BF16_FUSED_PROLOGUE): the prologue's rows of `a` written
// inside the GEMM launch by ProNormRows<false> (h3/norm_rows.cuh).
using ProNormRowsBf16 = ProNormRows<false>;

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define H3_CLUSTER_X2 __cluster_dims__(2, 1, 1)
#else
#define H3_CLUSTER_X2
#endif

#define H3_PA_PARAMS                                                                        \
  const __grid_constant__ TmaDesc desc_a, const __grid_constant__ TmaDesc desc_b,           \
      const __grid_constant__ TmaDesc desc_out, int M, int k_bytes,                         \
      const bf16_t *__restrict__ q_w, const bf16_t *__restrict__ k_w,                       \
      const bf16_t *__restrict__ cs, int cs_rows, const void *__restrict__ pos, int pos_is_64, \
      float qk_eps, int hp, float *tail_part, u32 *tail_count, int tail_splits

// Large M: clusters of two CTAs (B multicast), 128 x 256 tiles = two heads; the _heads kernel
// with the one-head-at-a-time epilogue (EpiPreAttnBf16<true>).
// H3_PA_BF16_X2_BODY(kHeads, Pro, pro): the engine on 128 x 256 tile pairs with the epilogue
// EpiPreAttnBf16<kHeads> and the producer hooks `pro` (of type Pro).
#define H3_PA_BF16_X2_BODY(kHeads, Pro, pro)                                                        \
  using Epi = EpiPreAttnBf16<kHeads>;                                                              \
  const Epi epi{{q_w, k_w, cs, pos, pos_is_64, cs_rows, M, hp, qk_eps}, &desc_out};                \
  gemm_sm90_body<0, 256, 0, 2, Epi, false, Pro, 2, false, true>(                                   \
      desc_a, desc_b, M, 3 * kPaKindCols, k_bytes, epi, pro, 1, {tail_part, tail_count, tail_splits})
#define H3_PA_BF16_X2(kHeads) H3_PA_BF16_X2_BODY(kHeads, NoProducerHooks, NoProducerHooks{})
__global__ void H3_CLUSTER_X2 __launch_bounds__(384, 1) pre_attention_bf16_x2_sm90(H3_PA_PARAMS) {
  H3_PA_BF16_X2(false);
}
__global__ void H3_CLUSTER_X2 __launch_bounds__(384, 1)
    pre_attention_bf16_x2_heads_sm90(H3_PA_PARAMS) {
  H3_PA_BF16_X2(true);
}
#undef H3_PA_BF16_X2

// The single-launch forms (ProNormRowsBf16): the prologue's operands and `a` as well.
#define H3_PA_FUSED_PARAMS                                                                    \
  H3_PA_PARAMS, const bf16_t *__restrict__ x, const bf16_t *__restrict__ x_w,                 \
      const bf16_t *__restrict__ ada_scale, const bf16_t *__restrict__ ada_shift,             \
      long long table_stride, long long rows, const void *__restrict__ ada_index,             \
      int index_is_64, float eps, bf16_t *a_out, u32 *tile_rows
#define H3_PA_BF16_X2_FUSED(kHeads)                                                                \
  const ProNormRowsBf16 pro{{tile_rows, M}, x,   x_w,         ada_scale, ada_shift, table_stride,  \
                            rows,           ada_index, index_is_64, eps,       a_out};             \
  H3_PA_BF16_X2_BODY(kHeads, ProNormRowsBf16, pro)
__global__ void H3_CLUSTER_X2 __launch_bounds__(384, 1)
    pre_attention_bf16_x2_fused_sm90(H3_PA_FUSED_PARAMS) {
  H3_PA_BF16_X2_FUSED(false);
}
__global__ void H3_CLUSTER_X2 __launch_bounds__(384, 1)
    pre_attention_bf16_x2_fused_heads_sm90(H3_PA_FUSED_PARAMS) {
  H3_PA_BF16_X2_FUSED(true);
}
#undef H3_PA_BF16_X2_FUSED
#undef H3_PA_FUSED_PARAMS
#undef H3_PA_BF16_X2_BODY

// M <= 256: single CTAs, 128 x 128 tiles = one head.
__global__ void __launch_bounds__(384, 1) pre_attention_bf16_sm90(H3_PA_PARAMS) {
  const EpiPreAttnBf16<> epi{{q_w, k_w, cs, pos, pos_is_64, cs_rows, M, hp, qk_eps}, &desc_out};
  gemm_sm90_body<0, 128, 0, 1, EpiPreAttnBf16<>, false, NoProducerHooks, 2, false, true>(
      desc_a, desc_b, M, 3 * kPaKindCols, k_bytes, epi, {}, 1, {tail_part, tail_count, tail_splits});
}

#undef H3_PA_PARAMS

}  // namespace h3
