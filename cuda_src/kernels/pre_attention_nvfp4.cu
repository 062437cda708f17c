// minimax_h3_nvfp4_pre_attention, launch 2 of 2 (SPEC.md section 4, W4A4): the NVFP4 QKV GEMM
// (h3/gemm_nvfp4.cuh: the block-scaled kind::mxf4nvf4 MMA on sm_120a, exact bf16 emulation on
// sm_90a) with the pre-attention epilogue on the mma.sync fragment layout:
//   y = bf16(acc * alpha), alpha = given or 1 / (act_global_scale * weight global scale) on the
//   device; Q/K RMSNorm + RoPE (identity positions) through h3/pre_attention.cuh's
//   MmaPreAttnMath; then the out mode (kOut 0 bf16, 1 e4m3, 2 nvfp4) into q, k, v [M, 56, ...].
// Stores are straight from registers: bf16 pairs, e4m3 pairs, and for NVFP4 one code byte per
// thread per 8 columns (a 16-column block sits in the 4 lanes of a quad: two shuffles give its
// amax) plus the scale byte from lane q4 == block % 4.
// Verified on the H200 (sm_90a emulation, every out mode, 2026-12-01); sm_120a compile- and
// SASS-checked only.
#include "h3/gemm_nvfp4.cuh"
#include "h3/pre_attention.cuh"
#include "h3/quant.cuh"

namespace h3 {

template <int kOut>
struct EpiMmaPreAttnQkv {
  MmaPreAttnMath math;
  float alpha;
  void* out[3];             // q, k, v: bf16 / e4m3 [M, 56, 128] or packed e2m1 [M, 56, 64]
  u8* sf[3];                // NVFP4 scales [M, 56, 8] (kOut 2)
  PaKindScalar scalar[3];   // e4m3: descale; nvfp4: global scale

  H3_DEVICE void operator()(float (&acc)[4][8][4], int row0, int col0, int wm, int wn,
                            u8* scratch) const {
#pragma unroll
    for (int mi = 0; mi < 4; ++mi)
#pragma unroll
      for (int ni = 0; ni < 8; ++ni)
#pragma unroll
        for (int r = 0; r < 4; ++r) acc[mi][ni][r] = round_bf16(acc[mi][ni][r] * alpha);
    math.apply(acc, row0, col0, wm, wn, scratch);
    const int lane = threadIdx.x % 32, q4 = lane % 4, M = math.M;
    const int kind = col0 / kPaKindCols;
    const int head = (col0 % kPaKindCols) / kPaHeadDim + wn / kPaHeadDim;
    const int half = (wn / 64) % 2;
    void* o = pick3(out, kind);
    const float sv = kOut == 0 ? 0.f : pick3(scalar, kind).get();
#pragma unroll
    for (int mi = 0; mi < 4; ++mi)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int row = row0 + wm + 16 * mi + lane / 4 + 8 * h;
        const bool in = row < M;  // NOTE: no early exit: the NVFP4 path shuffles in the quad
        const i64 rh = static_cast<i64>(in ? row : 0) * kPaHeads + head;
        if constexpr (kOut == 0) {
          bf16_t* dst = static_cast<bf16_t*>(o) + rh * kPaHeadDim + 64 * half + 2 * q4;
#pragma unroll
          for (int ni = 0; ni < 8; ++ni)
            if (in)
              *reinterpret_cast<u32*>(dst + 8 * ni) = pack_bf16x2(
                  f32_to_bf16(acc[mi][ni][2 * h]), f32_to_bf16(acc[mi][ni][2 * h + 1]));
        } else if constexpr (kOut == 1) {
          const float os = __frcp_rn(sv);
          u8* dst = static_cast<u8*>(o) + rh * kPaHeadDim + 64 * half + 2 * q4;
#pragma unroll
          for (int ni = 0; ni < 8; ++ni)
            if (in)
              *reinterpret_cast<u16*>(dst + 8 * ni) = static_cast<u16>(
                  e4m3x2(acc[mi][ni][2 * h] * os, acc[mi][ni][2 * h + 1] * os));
        } else {
          u8* dst = static_cast<u8*>(o) + rh * 64 + 32 * half + q4;
          u8* sdst = pick3(sf, kind) + rh * 8 + 4 * half;
#pragma unroll
          for (int bb = 0; bb < 4; ++bb) {  // 16-column blocks of this warp's 64 columns
            const float v0 = acc[mi][2 * bb][2 * h], v1 = acc[mi][2 * bb][2 * h + 1];
            const float v2 = acc[mi][2 * bb + 1][2 * h], v3 = acc[mi][2 * bb + 1][2 * h + 1];
            float amax = fmaxf(fmaxf(fabsf(v0), fabsf(v1)), fmaxf(fabsf(v2), fabsf(v3)));
            amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, 1));
            amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, 2));
            const Nvfp4Scale sc = nvfp4_scale(amax, sv);
            if (in) {
              dst[8 * bb] = static_cast<u8>(e2m1(v0 * sc.os) | (e2m1(v1 * sc.os) << 4));
              dst[8 * bb + 4] = static_cast<u8>(e2m1(v2 * sc.os) | (e2m1(v3 * sc.os) << 4));
              if (q4 == bb) sdst[bb] = sc.sf;
            }
          }
        }
      }
  }
};

template <int kOut>
__global__ void __launch_bounds__(kMtThreads, 1) pre_attention_nvfp4_smxx(
    const __grid_constant__ TmaDesc desc_a, const __grid_constant__ TmaDesc desc_b,
    const __grid_constant__ TmaDesc desc_sfa, const u8* __restrict__ sfb, int sfb_c4, int M,
    int k_bytes, const bf16_t* __restrict__ q_w, const bf16_t* __restrict__ k_w,
    const bf16_t* __restrict__ cs, int cs_rows, float qk_eps, const float* __restrict__ alpha_ptr,
    const float* __restrict__ ga_ptr, const float* __restrict__ gw_ptr, float gw_host,
    float alpha_host, void* oq, void* ok, void* ov, u8* sfq, u8* sfk, u8* sfv, const float* sp_q,
    const float* sp_k, const float* sp_v, float sh_q, float sh_k, float sh_v) {
  const float alpha = Nvfp4Alpha{alpha_ptr, ga_ptr, gw_ptr, gw_host, alpha_host}.get();
  const EpiMmaPreAttnQkv<kOut> epi{{q_w, k_w, cs, nullptr, 0, cs_rows, M, qk_eps},
                                   alpha,
                                   {oq, ok, ov},
                                   {sfq, sfk, sfv},
                                   {{sp_q, sh_q}, {sp_k, sh_k}, {sp_v, sh_v}}};
  gemm_nvfp4_body<EpiMmaPreAttnQkv<kOut>, 3, kMtScratchBytes>(
      desc_a, desc_b, desc_sfa, sfb, sfb_c4, M, 3 * kPaKindCols, k_bytes, epi);
}

}  // namespace h3
