// minimax_h3_bf16_pre_attention, launch 2 of 2 (SPEC.md section 3): the QKV GEMM on the sm_90a
// engine with the pre-attention epilogue. Launch 1 is the prologue (prologue.cu) writing `a`.
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
#include "h3/gemm_mma_tma.cuh"
#include "h3/gemm_sm90.cuh"
#include "h3/numeric.cuh"
#include "h3/pre_attention.cuh"

namespace h3 {

// The BF16 op's epilogue: the math, then the Ulysses pack. Head hd of the tile goes to destination
// head / hp, slot head % hp, kind, dims 64 * box ...
struct EpiPreAttnBf16 {
  PreAttnMath math;
  const TmaDesc* desc_out;

  template <int kAcc>
  H3_DEVICE void operator()(float (&d)[kAcc], int row0, int col0, u8* staging, int wg) const {
    math.apply(d, row0, col0);
    const int kind = col0 / kPaKindCols, head0 = (col0 % kPaKindCols) / kPaHeadDim;
    const int hp = math.hp;
    store_fragment_bf16(d, staging, wg, [&](int hd, int box, const u8* src) {
      const int head = head0 + hd;
      tma_store_3d(desc_out, src, (head % hp) * 384 + kind * kPaHeadDim + 64 * box, row0,
                   head / hp);
    });
  }
};

// The same epilogue on the mma.sync back end (h3/gemm_mma_tma.cuh: 8 warps of 64 x 64 on a
// 128 x 256 tile). A head's 128 columns are split over two warps (wn = 0, 64 or 128, 192), so the
// sum of squares and the RoPE partners that sit in the other warp (d in [16, 48) with d + 48) go
// through the scratch shared memory; everything else is in the thread. Stores are bf16 pairs
// straight into the pack.
struct EpiMmaPreAttnBf16 {
  const bf16_t* __restrict__ q_w;
  const bf16_t* __restrict__ k_w;
  const bf16_t* __restrict__ cs;
  const void* __restrict__ pos;
  int pos_is_64, cs_rows, M, hp;
  float qk_eps;
  bf16_t* __restrict__ out;

  H3_DEVICE int position(int row) const {
    if (row >= M) return 0;
    i64 p = row;
    if (pos != nullptr)
      p = pos_is_64 ? static_cast<const i64*>(pos)[row] : static_cast<const int*>(pos)[row];
    return static_cast<int>(p < 0 ? 0 : (p >= cs_rows ? cs_rows - 1 : p));
  }

  H3_DEVICE void operator()(float (&acc)[4][8][4], int row0, int col0, int wm, int wn,
                            u8* scratch) const {
    const int lane = threadIdx.x % 32, q4 = lane % 4, warp = threadIdx.x / 32;
    const int kind = col0 / kPaKindCols;
    const int head = (col0 % kPaKindCols) / kPaHeadDim + wn / kPaHeadDim;
    const int half = (wn / 64) % 2;  // columns [64 half, 64 half + 64) of the head
    // (mi, h) -> local row wm + 16 mi + lane / 4 + 8 h; (ni, e) -> head dim 64 half + 8 ni + 2 q4 + e
    if (kind < 2) {
      const bf16_t* g = kind == 0 ? q_w : k_w;
      float* red = reinterpret_cast<float*>(scratch);  // [128 rows][4 column quarters]
#pragma unroll
      for (int mi = 0; mi < 4; ++mi)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          float ss = 0.f;
#pragma unroll
          for (int ni = 0; ni < 8; ++ni)
#pragma unroll
            for (int e = 0; e < 2; ++e) {
              const float r = round_bf16(acc[mi][ni][2 * h + e]);
              acc[mi][ni][2 * h + e] = r;
              ss = __fmaf_rn(r, r, ss);
            }
          ss += __shfl_xor_sync(0xffffffffu, ss, 1);
          ss += __shfl_xor_sync(0xffffffffu, ss, 2);
          if (q4 == 0) red[(wm + 16 * mi + lane / 4 + 8 * h) * 4 + wn / 64] = ss;
        }
      __syncthreads();
      float rstd[4][2];
#pragma unroll
      for (int mi = 0; mi < 4; ++mi)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const float* rr = red + (wm + 16 * mi + lane / 4 + 8 * h) * 4 + (wn / 128) * 2;
          rstd[mi][h] = rsqrtf((rr[0] + rr[1]) * (1.f / kPaHeadDim) + qk_eps);
        }
      __syncthreads();  // red is read by everyone before the exchange reuses the scratch
      // Normalize, then publish the columns the partner warp needs for RoPE: half 0 its dims
      // [16, 48) (ni 2..5), half 1 its dims [64, 96) (ni 0..3): 64 rows x 32 dims per warp.
      bf16_t* xbuf = reinterpret_cast<bf16_t*>(scratch);
      const int ni0 = half == 0 ? 2 : 0;
#pragma unroll
      for (int mi = 0; mi < 4; ++mi)
#pragma unroll
        for (int h = 0; h < 2; ++h)
#pragma unroll
          for (int ni = 0; ni < 8; ++ni) {
            const int d = 64 * half + 8 * ni + 2 * q4;
            const u32 gw = *reinterpret_cast<const u32*>(g + d);
            const float n0 = round_bf16((acc[mi][ni][2 * h] * rstd[mi][h]) * __uint_as_float(gw << 16));
            const float n1 =
                round_bf16((acc[mi][ni][2 * h + 1] * rstd[mi][h]) * __uint_as_float(gw & 0xffff0000u));
            acc[mi][ni][2 * h] = n0;
            acc[mi][ni][2 * h + 1] = n1;
            if (ni >= ni0 && ni < ni0 + 4) {
              const int rr = 16 * mi + lane / 4 + 8 * h, cc = 8 * (ni - ni0) + 2 * q4;
              *reinterpret_cast<u32*>(xbuf + (warp * 64 + rr) * 32 + cc) =
                  pack_bf16x2(f32_to_bf16(n0), f32_to_bf16(n1));
            }
          }
      __syncthreads();
      const bf16_t* pbuf = xbuf + (warp ^ 1) * 64 * 32;  // the partner warp's columns
#pragma unroll
      for (int mi = 0; mi < 4; ++mi)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int rr = 16 * mi + lane / 4 + 8 * h;
          const bf16_t* csr = cs + static_cast<i64>(position(row0 + wm + rr)) * 96;
          auto c_at = [&](int d) { return bf16_to_f32(csr[d]); };
          if (half == 0) {
            // dims [0, 16) pair with [48, 64) in this thread: both outputs from the old values
#pragma unroll
            for (int ni = 0; ni < 2; ++ni)
#pragma unroll
              for (int e = 0; e < 2; ++e) {
                const int d = 8 * ni + 2 * q4 + e;
                const float lo = acc[mi][ni][2 * h + e], hi = acc[mi][ni + 6][2 * h + e];
                const float c = c_at(d), sn = c_at(48 + d);
                acc[mi][ni][2 * h + e] = round_bf16(__fmaf_rn(lo, c, -(hi * sn)));
                acc[mi][ni + 6][2 * h + e] = round_bf16(__fmaf_rn(hi, c, lo * sn));
              }
            // dims [16, 48): the partner d + 48 comes from the other warp
#pragma unroll
            for (int ni = 2; ni < 6; ++ni)
#pragma unroll
              for (int e = 0; e < 2; ++e) {
                const int d = 8 * ni + 2 * q4 + e;
                const float lo = acc[mi][ni][2 * h + e];
                const float hi = bf16_to_f32(pbuf[rr * 32 + (d - 16)]);
                acc[mi][ni][2 * h + e] =
                    round_bf16(__fmaf_rn(lo, c_at(d), -(hi * c_at(48 + d))));
              }
          } else {
            // dims [64, 96): out_d = n_d c + n_{d-48} s with c = cs[d - 48], s = cs[d]; the
            // partner d - 48 in [16, 48) comes from the other warp; dims [96, 128) pass through
#pragma unroll
            for (int ni = 0; ni < 4; ++ni)
#pragma unroll
              for (int e = 0; e < 2; ++e) {
                const int d = 64 + 8 * ni + 2 * q4 + e;
                const float hi = acc[mi][ni][2 * h + e];
                const float lo = bf16_to_f32(pbuf[rr * 32 + (d - 64)]);
                acc[mi][ni][2 * h + e] = round_bf16(__fmaf_rn(hi, c_at(d - 48), lo * c_at(d)));
              }
          }
        }
      __syncthreads();  // the exchange buffer is free again for the next tile
    }
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
  const EpiMmaPreAttnBf16 epi{q_w, k_w, cs, pos, pos_is_64, cs_rows, M, hp, qk_eps, out};
  gemm_mma_tma_body<0>(desc_a, desc_b, M, 3 * kPaKindCols, k_bytes, epi);
}

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
      float qk_eps, int hp

// Large M: clusters of two CTAs (B multicast), 128 x 256 tiles = two heads.
__global__ void H3_CLUSTER_X2 __launch_bounds__(384, 1) pre_attention_bf16_x2_sm90(H3_PA_PARAMS) {
  const EpiPreAttnBf16 epi{{q_w, k_w, cs, pos, pos_is_64, cs_rows, M, hp, qk_eps}, &desc_out};
  gemm_sm90_body<0, 256, 0, 2>(desc_a, desc_b, M, 3 * kPaKindCols, k_bytes, epi);
}

// Large M, ping-pong: 128 x 128 tiles (one head), each consumer warpgroup a whole tile, so one
// warpgroup's epilogue overlaps the other's MMAs.
__global__ void H3_CLUSTER_X2 __launch_bounds__(384, 1)
    pre_attention_bf16_pp_x2_sm90(H3_PA_PARAMS) {
  const EpiPreAttnBf16 epi{{q_w, k_w, cs, pos, pos_is_64, cs_rows, M, hp, qk_eps}, &desc_out};
  gemm_sm90_body<0, 128, 0, 2, EpiPreAttnBf16, true>(desc_a, desc_b, M, 3 * kPaKindCols, k_bytes,
                                                     epi);
}

// M <= 256: single CTAs, 128 x 128 tiles = one head.
__global__ void __launch_bounds__(384, 1) pre_attention_bf16_sm90(H3_PA_PARAMS) {
  const EpiPreAttnBf16 epi{{q_w, k_w, cs, pos, pos_is_64, cs_rows, M, hp, qk_eps}, &desc_out};
  gemm_sm90_body<0, 128, 0, 1>(desc_a, desc_b, M, 3 * kPaKindCols, k_bytes, epi);
}

#undef H3_PA_PARAMS

}  // namespace h3
