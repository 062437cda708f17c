// minimax_h3_fp8_out_proj (SPEC.md section 5), the GEMM launch: the W8A8 projection on the sm_90a
// engine (e4m3, fp32 promotion) with the gated-residual epilogue
//   o   = bf16((acc * act_scale[m]) * w_scale[n])
//   out = bf16(residual[m, n] + bf16(gate[i, n] * o)),   i = gate_index[m]
//   out = residual[m, n] exactly when i is outside [0, rows) (a select: o never reaches the row)
// bf16 x bf16 products are exact in fp32, so the only roundings are the two bf16 ones. `out` may
// alias `residual`: each element is read (into registers) before its tile is stored.
// Stepping stone: the per-token FP8 quantization of attn_out runs as its own launch before this
// one (quantize.cu); the issue's single launch (spare producer warps quantizing tiles behind
// ready flags) comes next.
// NOTE: compile- and SASS-checked; not yet run on a GPU (2026-12-01).
#include "h3/gemm_sm90.cuh"

namespace h3 {

struct EpiGatedResidual {
  const float* __restrict__ act_scale;  // [M]
  const float* __restrict__ w_scale;    // [N]
  const bf16_t* residual;               // [M, N] (may alias the output)
  const bf16_t* __restrict__ gate;      // [rows, N], row stride gate_stride
  i64 gate_stride, rows;
  const void* __restrict__ gate_index;  // int32 / int64 [M]
  int index_is_64, M, N;
  const TmaDesc* desc_out;              // out [M, N] bf16, 64 x 64 boxes, 128B swizzle

  template <int kAcc>
  H3_DEVICE void operator()(float (&d)[kAcc], int row0, int col0, u8* staging, int wg) const {
    const int lane = threadIdx.x % 32, w = (threadIdx.x % 128) / 32, q4 = lane % 4;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int row = row0 + 16 * w + lane / 4 + 8 * h;
      const bool in = row < M;
      const float as = in ? act_scale[row] : 0.f;
      i64 gi = -1;
      if (in)
        gi = index_is_64 ? static_cast<const i64*>(gate_index)[row]
                         : static_cast<const int*>(gate_index)[row];
      // NOTE: the guard: no gate address is formed for an invalid index.
      const bool valid = gi >= 0 && gi < rows;
      const bf16_t* grow = gate + (valid ? gi : 0) * gate_stride;
      const bf16_t* rrow = residual + static_cast<i64>(in ? row : 0) * N;
#pragma unroll
      for (int j = 0; j < kAcc / 4; ++j) {
        const int col = col0 + 8 * j + 2 * q4;
        float v0 = 0.f, v1 = 0.f;
        if (in && col < N) {
          const u32 rv = *reinterpret_cast<const u32*>(rrow + col);
          const float r0 = __uint_as_float(rv << 16), r1 = __uint_as_float(rv & 0xffff0000u);
          v0 = r0;
          v1 = r1;
          if (valid) {
            const float2 ws = *reinterpret_cast<const float2*>(w_scale + col);
            const float o0 = round_bf16((d[4 * j + 2 * h] * as) * ws.x);
            const float o1 = round_bf16((d[4 * j + 2 * h + 1] * as) * ws.y);
            const u32 gv = *reinterpret_cast<const u32*>(grow + col);
            v0 = r0 + round_bf16(__uint_as_float(gv << 16) * o0);
            v1 = r1 + round_bf16(__uint_as_float(gv & 0xffff0000u) * o1);
          }
        }
        d[4 * j + 2 * h] = v0;  // the store's bf16 conversion is the final rounding
        d[4 * j + 2 * h + 1] = v1;
      }
    }
    store_fragment_bf16(d, staging, wg, [&](int p, int box, const u8* src) {
      const int x = col0 + 128 * p + 64 * box;
      if (x < N) tma_store_2d(desc_out, src, x, row0);
    });
  }
};

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define H3_CLUSTER_X2 __cluster_dims__(2, 1, 1)
#else
#define H3_CLUSTER_X2
#endif

#define H3_OP_PARAMS                                                                         \
  const __grid_constant__ TmaDesc desc_a, const __grid_constant__ TmaDesc desc_b,            \
      const __grid_constant__ TmaDesc desc_out, int M, int N, int k_bytes,                   \
      const float *__restrict__ act_scale, const float *__restrict__ w_scale,                \
      const bf16_t *residual, const bf16_t *__restrict__ gate, long long gate_stride,         \
      long long rows, const void *__restrict__ gate_index, int index_is_64

// M > 256: clusters of two, 128 x 192 tiles.
__global__ void H3_CLUSTER_X2 __launch_bounds__(384, 1) out_proj_fp8_x2_sm90(H3_OP_PARAMS) {
  const EpiGatedResidual epi{act_scale, w_scale,    residual, gate, gate_stride, rows,
                             gate_index, index_is_64, M,       N,    &desc_out};
  gemm_sm90_body<1, 192, 1, 2>(desc_a, desc_b, M, N, k_bytes, epi);
}

// Small M: single CTAs, 128 x 128 tiles.
__global__ void __launch_bounds__(384, 1) out_proj_fp8_sm90(H3_OP_PARAMS) {
  const EpiGatedResidual epi{act_scale, w_scale,    residual, gate, gate_stride, rows,
                             gate_index, index_is_64, M,       N,    &desc_out};
  gemm_sm90_body<1, 128, 1, 1>(desc_a, desc_b, M, N, k_bytes, epi);
}

#undef H3_OP_PARAMS

}  // namespace h3
