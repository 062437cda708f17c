// minimax_h3_fp8_pre_attention, launch 2 of 2 (SPEC.md section 4): the W8A8 QKV GEMM on the
// sm_90a engine (e4m3 operands, fp32 promotion per two 128-deep k-tiles; a consumer warpgroup's
// 64 x 128 fragment is one (kind, head) for 64 rows; tiles of 192 x 128 (three consumer
// warpgroups) or 128 x 128) with the pre-attention epilogue and the output modes:
//   y = bf16((acc * act_scale[m]) * w_scale[n]);  Q/K RMSNorm + RoPE (h3/pre_attention.cuh); V = y
//   kOut 0 "bf16":  q, k, v bf16 [M, 56, 128]
//   kOut 1 "e4m3":  e4m3(v * os), os = RN(1 / fp32(descale)) of the kind, [M, 56, 128]
//   kOut 2 "nvfp4": NVFP4 per 16 channels of a head (SPEC section 1) with the kind's global scale:
//                   codes uint8 [M, 56, 64], linear ue4m3 scales uint8 [M, 56, 8]
// Positions are the identity (row m uses cache row m). Per-kind scalars come from a device
// pointer (read here, no host sync) or a host value.
// Outputs go through the warpgroup's 16 KiB staging buffer and TMA stores (2-D tensor maps of
// each output viewed as [M, columns], which clip rows past M); the NVFP4 scales are single-byte
// global stores.
// Verified on the H200 (every out mode, 2026-12-01).
#include "h3/norm_rows.cuh"
#include "h3/pre_attention_wg.cuh"

namespace h3 {

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define H3_CLUSTER_X2 __cluster_dims__(2, 1, 1)
#else
#define H3_CLUSTER_X2
#endif

#define H3_PA8_PARAMS                                                                         \
  const __grid_constant__ TmaDesc desc_a, const __grid_constant__ TmaDesc desc_b,             \
      const __grid_constant__ TmaDesc desc_q, const __grid_constant__ TmaDesc desc_k,         \
      const __grid_constant__ TmaDesc desc_v, int M, int k_bytes,                             \
      const bf16_t *__restrict__ q_w, const bf16_t *__restrict__ k_w,                         \
      const bf16_t *__restrict__ cs, int cs_rows, const float *__restrict__ act_scale,        \
      const float *__restrict__ w_scale, u8 *sf_q, u8 *sf_k, u8 *sf_v, const float *sp_q,     \
      const float *sp_k, const float *sp_v, float sh_q, float sh_k, float sh_v, float qk_eps,   \
      float *tail_part, u32 *tail_count, int tail_splits

#define H3_PA8_EPI                                                                        \
  const EpiPreAttnQkv<kOut, WgYRowCol> epi {                                              \
    {q_w, k_w, cs, nullptr, 0, cs_rows, M, 1, qk_eps}, {act_scale, w_scale},              \
        {&desc_q, &desc_k, &desc_v}, {sf_q, sf_k, sf_v}, {{sp_q, sh_q}, {sp_k, sh_k}, {sp_v, sh_v}} \
  }

// One kernel on the one-head epilogue with the tail split: 64 x WG-row tiles of 128 columns (WG
// consumer warpgroups, 128 x (WG + 1) threads) in clusters of CLUSTER CTAs (CLUSTER_ATTR its
// __cluster_dims__).
#define H3_PA8_KERNEL(NAME, CLUSTER_ATTR, CLUSTER, WG)                                        \
  template <int kOut>                                                                        \
  __global__ void CLUSTER_ATTR __launch_bounds__(128 * (WG + 1), 1) NAME(H3_PA8_PARAMS) {    \
    H3_PA8_EPI;                                                                              \
    gemm_sm90_body<1, 128, kOpsFp8Promote, CLUSTER, EpiPreAttnQkv<kOut, WgYRowCol>, false,    \
                   NoProducerHooks, WG, false, true>(desc_a, desc_b, M, 3 * kPaKindCols,      \
                                                     k_bytes, epi, {}, 1,                     \
                                                     {tail_part, tail_count, tail_splits});   \
  }

// M > 256, 128 x 128 tiles (pre_attention.FP8_TILE = "m128"): clusters of two CTAs multicasting B.
H3_PA8_KERNEL(pre_attention_fp8_x2_sm90, H3_CLUSTER_X2, 2, 2)
// M > 256, 192 x 128 tiles (pre_attention.FP8_TILE = "m192"): three consumer warpgroups, one
// head each for 64 rows, in clusters of two CTAs multicasting B (gemm.FP8_CLUSTER = 2): 11% fewer
// L2 bytes per FLOP than 128 x 128 pairs (256 against 192 rows loaded per 192 x 128 against
// 128 x 128 outputs), 14% more than the engine's n192 pairs; or on single CTAs
// (gemm.FP8_CLUSTER = 1).
H3_PA8_KERNEL(pre_attention_fp8_m192_x2_sm90, H3_CLUSTER_X2, 2, 3)
H3_PA8_KERNEL(pre_attention_fp8_m192_sm90, , 1, 3)
// M <= 256: 128 x 128 tiles on single CTAs.
H3_PA8_KERNEL(pre_attention_fp8_sm90, , 1, 2)

// M > 256, 128 x 192 tiles in N-tile pairs (pre_attention.FP8_TILE = "n192", the default since
// 2026-12-02, 4-8% faster than the 192 x 128 tiles on the H200): the engine's FP8
// default tile (two m64n192 warpgroups) on single CTAs, each CTA running the two 192-column
// tiles of a 384-column pair back to back so that the head straddling them goes through the
// epilogue's 16 KiB stash per warpgroup (EpiPreAttnPair, around the one-head epilogue). No tail
// split; the _tail kernel has it (the host launches it when the plan splits, gemm.tail_plan):
// the R pairs left for the grid's last round (at M = 4824: 2128 pairs = 16 x 132 + 16, so 16
// pairs on 132 CTAs, ~5% of the launch) run in S k-ranges of both tiles on otherwise idle CTAs,
// and each warpgroup's last arrival sums the partials and runs the pair's two epilogues
// (h3/gemm_sm90.cuh, pair_iter).
#define H3_PA8_N192(NAME, TAIL)                                                                \
  template <int kOut>                                                                          \
  __global__ void __launch_bounds__(384, 1) NAME(H3_PA8_PARAMS) {                              \
    H3_PA8_EPI;                                                                                \
    const EpiPreAttnPair<kOut> pair{epi};                                                      \
    gemm_sm90_body<1, 192, kOpsFp8Promote, 1, EpiPreAttnPair<kOut>, false, NoProducerHooks, 2,  \
                   false, TAIL>(desc_a, desc_b, M, 3 * kPaKindCols, k_bytes, pair, {}, 1,       \
                                {tail_part, tail_count, tail_splits});                         \
  }
H3_PA8_N192(pre_attention_fp8_n192_sm90, false)
H3_PA8_N192(pre_attention_fp8_n192_tail_sm90, true)
#undef H3_PA8_N192

// The single launch (pre_attention.FP8_FUSED_PROLOGUE, session 26; the n192 pairs without the
// tail split): the prologue's rows, per-token FP8 (act_q codes and act_scale), written inside
// this launch by ProNormRows<true> (h3/norm_rows.cuh: the consumer warps the first round's rows,
// the spare producer warps the rest, published per 128-row tile), instead of a prologue launch
// before it; the epilogue reads act_scale through L2 (EpiPreAttnPair<kOut, true>). The same
// bytes as the two launches: the prologue's arithmetic and reduction order.
#define H3_PA8_N192_FUSED(NAME, CLUSTER_ATTR, CLUSTER)                                        \
  template <int kOut>                                                                          \
  __global__ void CLUSTER_ATTR __launch_bounds__(384, 1) NAME(                                 \
      H3_PA8_PARAMS, const bf16_t* __restrict__ x, const bf16_t* __restrict__ x_w,             \
      const bf16_t* __restrict__ ada_scale, const bf16_t* __restrict__ ada_shift,              \
      long long table_stride, long long rows, const void* __restrict__ ada_index,              \
      int index_is_64, float eps, u8* act_q, u32* tile_rows) {                                 \
    const EpiPreAttnQkv<kOut, WgYRowColT<true>> epi{                                           \
        {q_w, k_w, cs, nullptr, 0, cs_rows, M, 1, qk_eps}, {act_scale, w_scale},               \
        {&desc_q, &desc_k, &desc_v}, {sf_q, sf_k, sf_v},                                       \
        {{sp_q, sh_q}, {sp_k, sh_k}, {sp_v, sh_v}}};                                           \
    const EpiPreAttnPair<kOut, true> pair{epi};                                                \
    /* (act_scale: the epilogue's read pointer, written through the same pointer here) */      \
    const ProNormRows<true> pro{{tile_rows, M},      x,   x_w,     ada_scale,                  \
                                ada_shift,           table_stride, rows, ada_index,            \
                                index_is_64,         eps, act_q,   const_cast<float*>(act_scale)}; \
    gemm_sm90_body<1, 192, kOpsFp8Promote, CLUSTER, EpiPreAttnPair<kOut, true>, false,         \
                   ProNormRows<true>, 2, false, false>(desc_a, desc_b, M, 3 * kPaKindCols,     \
                                                       k_bytes, pair, pro, 1,                  \
                                                       {tail_part, tail_count, tail_splits});  \
  }
// The single launch (pre_attention.FP8_FUSED_PROLOGUE) on single CTAs, and in clusters of two
// multicasting the weight tiles (pre_attention.FP8_PAIR_CLUSTER; both CTAs run the same pairs).
H3_PA8_N192_FUSED(pre_attention_fp8_n192_fused_sm90, , 1)
H3_PA8_N192_FUSED(pre_attention_fp8_n192_fused_x2_sm90, H3_CLUSTER_X2, 2)
#undef H3_PA8_N192_FUSED

#undef H3_PA8_KERNEL
#undef H3_PA8_EPI
#undef H3_PA8_PARAMS

}  // namespace h3
