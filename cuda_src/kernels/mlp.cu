// minimax_h3_mlp_fp8_sm120 (SPEC.md section 6), the FC1 launch: the W8A8 FC1 GEMM on the sm_90a
// engine (e4m3, fp32 promotion) over the PREPACKED weight rows with the SwiGLU epilogue
//   h = bf16((acc * a_scale[m]) * w1_scale[n])
//   y = bf16(bf16(silu(h_gate)) * h_up)              silu(t) = t / (1 + exp(-t)) in fp32
// (silu from the approximate exp2 and reciprocal: quant.cuh silu_approx).
// The prepacked order puts gate columns 8b..8b+7 of the FFN in tile columns 16b..16b+7 and the
// matching up columns in 16b+8..16b+15 (formats.fc1_prepack_source_rows), so in the warpgroup
// fragment group j = 2b (gate) and j = 2b + 1 (up) hold the same FFN columns in the same thread:
// SwiGLU is register-local. The y values are compacted in place into a fragment of half the
// width (group b -> FFN columns col0 / 2 + 8b ...), which has the layout store_fragment_bf16_w32
// expects, and stored by TMA into y [M, 14336] in 32-column boxes (a 192-wide tile gives 96 y
// columns, which 64-column boxes cannot tile).
// FC2 reuses the out_proj kernels (out_proj.cu: gated-residual epilogue) on y's per-token FP8.
#include "h3/gemm_mma_tma.cuh"
#include "h3/gemm_sm90.cuh"
#include "h3/norm_rows.cuh"
#include "h3/quant.cuh"

namespace h3 {

// kVecCols > 0 (tile N; the 192-column kernel): a_scale of the tile's 64 rows and w_scale of its
// columns come through shared memory (the engine's kVecBytes, copied during the mainloop) instead
// of global loads in the epilogue, while the tensor cores idle (session 10's engine probe: FC1's
// epilogue went from 2.1 to 1.7 us per tile, and FC1's time did not move, NOTES.md).
// kLiveRows (the single launch, mlp.FC1_FUSED_PROLOGUE): a_scale is written inside the launch
// (ProNormRows<true>), so prefetch_vec, which runs before the tile's rows are published, copies
// only w_scale, and the epilogue reads a_scale through L2 (__ldcg) after the mainloop, whose A
// loads waited for the rows.
template <int kVecCols = 0, bool kLiveRows = false>
struct EpiSwiglu {
  static_assert(!kLiveRows || kVecCols > 0, "the single launch: the 192-column kernel");
  static constexpr int kVecBytes = kVecCols > 0 ? 4 * (64 + kVecCols) : 0;
  const float* __restrict__ a_scale;   // [M]
  const float* __restrict__ w_scale;   // [2 * ffn], prepacked order
  const TmaDesc* desc_y;               // y [M, ffn] bf16, 32-column x 64-row boxes, 64B swizzle
  int M, N;                            // N = 2 * ffn (prepacked GEMM width)

  // kVecCols: a_scale (zeros past M) at vec[0..63], w_scale of columns col0.. at vec[64..]
  template <int kBN>
  H3_DEVICE void prefetch_vec(int row0, int col0, u8* vec) const {
    static_assert(kBN == kVecCols, "the vector area holds kVecCols columns");
    float* v = reinterpret_cast<float*>(vec);
    cp_async_wait_all();  // (no unit of this kernel skips its epilogue; kept for symmetry)
    if constexpr (!kLiveRows) vec_copy_f32<64>(v, a_scale, row0, M);
    vec_copy_f32<kBN>(v + 64, w_scale, col0, N);
    cp_async_commit();
  }

  template <int kAcc>
  H3_DEVICE void operator()(float (&d)[kAcc], int row0, int col0, u8* staging, int wg,
                            u8* vec) const {
    static_assert(2 * kAcc == kVecCols, "the vector area holds this tile's columns");
    vec_wait(wg);
    const u32 v = smem_addr(vec);
    const int lane = threadIdx.x % 32, w = (threadIdx.x % 128) / 32, q4 = lane % 4;
    swiglu_store(d, row0, col0, staging, wg, [&](int b, bool up) {
      return lds_f2(v + 4 * (64 + 16 * b + 2 * q4 + (up ? 8 : 0)));
    }, [&](int h) {
      if constexpr (kLiveRows) {
        const int row = row0 + 16 * w + lane / 4 + 8 * h;
        return row < M ? __ldcg(a_scale + row) : 0.f;
      } else {
        return lds_f32(v + 4 * (16 * w + lane / 4 + 8 * h));
      }
    });
  }

  template <int kAcc>
  H3_DEVICE void operator()(float (&d)[kAcc], int row0, int col0, u8* staging, int wg) const {
    static_assert(kVecCols == 0, "kVecCols: the engine passes the vector area");
    const int lane = threadIdx.x % 32, w = (threadIdx.x % 128) / 32, q4 = lane % 4;
    swiglu_store(d, row0, col0, staging, wg, [&](int b, bool up) {
      const int cg = col0 + 16 * b + 2 * q4 + (up ? 8 : 0);  // gate column pair; up at +8
      return cg < N ? *reinterpret_cast<const float2*>(w_scale + cg) : make_float2(0.f, 0.f);
    }, [&](int h) {
      const int row = row0 + 16 * w + lane / 4 + 8 * h;
      return row < M ? a_scale[row] : 0.f;
    });
  }

  // ws(b, up): the weight scales of block b's gate (up: up) column pair; as(h): the activation
  // scale of row half h.
  template <int kAcc, class Ws, class As>
  H3_DEVICE void swiglu_store(float (&d)[kAcc], int row0, int col0, u8* staging, int wg,
                              const Ws& ws, const As& as_of) const {
    static_assert(kAcc % 8 == 0, "whole 16-column gate/up blocks per tile");
    constexpr int kBlocks = kAcc / 8;  // 16-column gate/up blocks
    // NOTE: every scale is loaded before any is used (one memory latency per tile instead of one
    // per block, as a load-use per block leaves them exposed); shared by both row halves.
    float2 wg_s[kBlocks], wu_s[kBlocks];
#pragma unroll
    for (int b = 0; b < kBlocks; ++b) {
      wg_s[b] = ws(b, false);
      wu_s[b] = ws(b, true);
    }
    float as[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) as[h] = as_of(h);
    const int ffn = N / 2, ycol0 = col0 / 2;
    auto store_box = [&](int box, const u8* src) {
      const int x = ycol0 + 32 * box;
      if (x < ffn) tma_store_2d(desc_y, src, x, row0);
    };
    // Block b's column pair in row half h, gate (up = false) or up: (acc * a_scale) * w_scale,
    // in fp32, before its bf16 rounding.
    auto scaled_pair = [&](int b, int h, bool up, float& x0, float& x1) {
      const float2 ws = up ? wu_s[b] : wg_s[b];
      x0 = (d[4 * (2 * b + up) + 2 * h] * as[h]) * ws.x;
      x1 = (d[4 * (2 * b + up) + 2 * h + 1] * as[h]) * ws.y;
    };
    // y into its own half-width fragment (group b -> FFN columns col0 / 2 + 8b ..., the layout
    // store_fragment_bf16_w32 expects). The roundings of g, u and silu(g) are paired (one
    // cvt.rn.bf16x2 each). y = bf16(s) * u is exact in fp32 (two 8-bit significands), so y's
    // rounding is left to the store's conversion (the same RN).
    float yh[kAcc / 2];
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
      for (int b = 0; b < kBlocks; ++b) {
        float g0, g1, u0, u1;
        scaled_pair(b, h, false, g0, g1);
        scaled_pair(b, h, true, u0, u1);
        round_bf16x2(g0, g1);
        round_bf16x2(u0, u1);
        float s0 = silu_approx(g0), s1 = silu_approx(g1);
        round_bf16x2(s0, s1);
        yh[4 * b + 2 * h] = s0 * u0;
        yh[4 * b + 2 * h + 1] = s1 * u1;
      }
    store_fragment_bf16_w32(yh, staging, wg, store_box);
  }
};

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define H3_CLUSTER_X2 __cluster_dims__(2, 1, 1)
#else
#define H3_CLUSTER_X2
#endif

#define H3_FC1_PARAMS                                                                  \
  const __grid_constant__ TmaDesc desc_a, const __grid_constant__ TmaDesc desc_b,      \
      const __grid_constant__ TmaDesc desc_y, int M, int N, int k_bytes,               \
      const float *__restrict__ a_scale, const float *__restrict__ w_scale

// M > 256 (clusters of two where gemm.fp8_ops_cluster(M) = 2: the default from M = 16384 on),
// 128 x 192 tiles (96 FFN columns each; promoted FP8 at n192 measured ~1.3-1.5x the rate of n128
// on the H200, NOTES.md). N = 28672 = 149 x 192 + 64: the last tile column is a tail (B rows past
// N load as zeros; y columns past 14336 are not stored).
__global__ void H3_CLUSTER_X2 __launch_bounds__(384, 1) mlp_fc1_fp8_x2_sm90(H3_FC1_PARAMS) {
  const EpiSwiglu<H3_EPI_VEC(192)> epi{a_scale, w_scale, &desc_y, M, N};
  gemm_sm90_body<1, 192, kOpsFp8Promote, 2>(desc_a, desc_b, M, N, k_bytes, epi);
}

// M > 256 where gemm.fp8_ops_cluster(M) = 1: the same 128 x 192 tiles on single CTAs.
__global__ void __launch_bounds__(384, 1) mlp_fc1_fp8_n192_sm90(H3_FC1_PARAMS) {
  const EpiSwiglu<H3_EPI_VEC(192)> epi{a_scale, w_scale, &desc_y, M, N};
  gemm_sm90_body<1, 192, kOpsFp8Promote, 1>(desc_a, desc_b, M, N, k_bytes, epi);
}

// The single launch (mlp.FC1_FUSED_PROLOGUE; M > 256 where gemm.fp8_ops_cluster(M) = 1): the same
// 128 x 192 single-CTA tiles, the prologue's rows of a (per-token FP8: a_q codes and a_scale)
// written inside this launch by ProNormRows<true> (h3/norm_rows.cuh: the consumer warps the first
// round's rows, the spare producer warps the rest, published per 128-row tile through
// tile_rows), as the FP8 pre-attention's single launch does; the epilogue reads a_scale through
// L2 (EpiSwiglu<192, true>). The same bytes as the prologue launch: its arithmetic and order.
__global__ void __launch_bounds__(384, 1) mlp_fc1_fp8_n192_fused_sm90(
    H3_FC1_PARAMS, const bf16_t* __restrict__ x, const bf16_t* __restrict__ x_w,
    const bf16_t* __restrict__ ada_scale, const bf16_t* __restrict__ ada_shift,
    long long table_stride, long long rows, const void* __restrict__ ada_index, int index_is_64,
    float eps, u8* a_q, u32* tile_rows) {
  const EpiSwiglu<192, true> epi{a_scale, w_scale, &desc_y, M, N};
  // (a_scale: the epilogue's read pointer, written through the same pointer here)
  const ProNormRows<true> pro{{tile_rows, M}, x,    x_w,       ada_scale,   ada_shift,
                              table_stride,   rows, ada_index, index_is_64, eps,
                              a_q,            const_cast<float*>(a_scale)};
  gemm_sm90_body<1, 192, kOpsFp8Promote, 1, EpiSwiglu<192, true>, false, ProNormRows<true>>(
      desc_a, desc_b, M, N, k_bytes, epi, pro);
}

// Small M: single CTAs, 128 x 128 tiles.
__global__ void __launch_bounds__(384, 1) mlp_fc1_fp8_sm90(H3_FC1_PARAMS) {
  const EpiSwiglu<> epi{a_scale, w_scale, &desc_y, M, N};
  gemm_sm90_body<1, 128, kOpsFp8Promote, 1>(desc_a, desc_b, M, N, k_bytes, epi);
}

#undef H3_FC1_PARAMS

// FC1 on the mma.sync back end (the sm_120a path; also runs on sm_90a): the TMA-fed mma.sync
// skeleton (h3/gemm_mma_tma.cuh, 128 x 256 tiles, 8 warps of 64 x 64). In the mma fragment the
// warp's 8-column groups ni = 2b (gate) and 2b + 1 (up) hold the same 8 FFN columns in the same
// thread (prepacked order), so SwiGLU is register-local as on the wgmma path; y pairs are stored
// from registers. h = bf16((acc * a_scale[m]) * w_scale[n]) is MmaYRowCol.
struct EpiMmaSwiglu {
  MmaYRowCol scale;  // N = 2 * ffn
  bf16_t* __restrict__ y;  // [M, ffn]

  H3_DEVICE void operator()(float (&acc)[4][8][4], int row0, int col0, int wm, int wn,
                            u8* /*scratch*/) const {
    scale(acc, row0, col0, wm, wn);
    const int lane = threadIdx.x % 32, q4 = lane % 4;
    const int ffn = scale.N / 2, ycol0 = (col0 + wn) / 2 + 2 * q4;
#pragma unroll
    for (int mi = 0; mi < 4; ++mi)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int row = row0 + wm + 16 * mi + lane / 4 + 8 * h;
        if (row >= scale.M) continue;
        bf16_t* yrow = y + static_cast<i64>(row) * ffn;
#pragma unroll
        for (int b = 0; b < 4; ++b) {
          float v[2];
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const float g = acc[mi][2 * b][2 * h + e], u = acc[mi][2 * b + 1][2 * h + e];
            const float silu = round_bf16(silu_approx(g));
            v[e] = round_bf16(silu * u);
          }
          const int yc = ycol0 + 8 * b;
          if (yc < ffn)
            *reinterpret_cast<u32*>(yrow + yc) = pack_bf16x2(f32_to_bf16(v[0]), f32_to_bf16(v[1]));
        }
      }
  }
};

// kFmt 1: legacy e4m3 mma.sync; 2: kind::mxf8f6f4 with unit scales (sm_120a only).
template <int kFmt>
__global__ void __launch_bounds__(kMtThreads, 1) mlp_fc1_fp8_mma_smxx(
    const __grid_constant__ TmaDesc desc_a, const __grid_constant__ TmaDesc desc_b, int M, int N,
    int k_bytes, const float* __restrict__ a_scale, const float* __restrict__ w_scale,
    bf16_t* __restrict__ y) {
  const EpiMmaSwiglu epi{{a_scale, w_scale, M, N}, y};
  gemm_mma_tma_body<kFmt, EpiMmaSwiglu, false, MtSm120>(desc_a, desc_b, M, N, k_bytes, epi);
}

}  // namespace h3
