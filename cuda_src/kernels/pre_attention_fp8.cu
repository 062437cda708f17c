// minimax_h3_fp8_pre_attention, launch 2 of 2 (SPEC.md section 4): the W8A8 QKV GEMM on the
// sm_90a engine (e4m3 operands, fp32 promotion per 128-deep k-tile, 128 x 128 tiles = one
// (kind, head)) with the pre-attention epilogue and the output modes:
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
#include "h3/gemm_sm90.cuh"
#include "h3/pre_attention.cuh"
#include "h3/quant.cuh"

namespace h3 {

enum PaOut : int { kPaOutBf16 = 0, kPaOutE4m3 = 1, kPaOutNvfp4 = 2 };


// e4m3 codes of a warpgroup's 64 x 128 fragment into a 128B-swizzled 64 x 128-byte box (16-byte
// chunk c of row r at chunk c ^ (r % 8)), then one TMA store.
template <class StoreBox>
H3_DEVICE void store_fragment_e4m3(const float (&d)[64], float os, u8* staging, int bar_id,
                                   const StoreBox& store) {
  const int tid = threadIdx.x % 128, lane = tid % 32, w = tid / 32, q4 = lane % 4;
  const u32 base = smem_addr(staging);
  if (tid == 0) bulk_wait_read();
  named_barrier_sync(bar_id, 128);
#pragma unroll
  for (int j = 0; j < 16; ++j)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = 16 * w + lane / 4 + 8 * h;
      const u16 v = static_cast<u16>(e4m3x2(d[4 * j + 2 * h] * os, d[4 * j + 2 * h + 1] * os));
      const u32 addr = base + r * 128 + (((j / 2) ^ (lane / 4)) * 16) + 8 * (j % 2) + 2 * q4;
      asm volatile("st.shared.u16 [%0], %1;" ::"r"(addr), "h"(v) : "memory");
    }
  fence_proxy_async_smem();
  named_barrier_sync(bar_id, 128);
  if (tid == 0) {
    store(staging);
    bulk_commit();
  }
}

// NVFP4 of a warpgroup's 64 x 128 fragment (one head): per row, 8 blocks of 16 channels; a
// block's 16 values sit in the 4 lanes of a quad (groups j = 2b, 2b + 1), so two shuffles give its
// amax. Codes (element 2i in the low nibble of byte i) go to a plain 64 x 64-byte box and one TMA
// store; each scale byte is written by lane q4 == b % 4 of the quad.
template <class StoreBox>
H3_DEVICE void store_fragment_nvfp4(const float (&d)[64], float g, u8* staging, int bar_id,
                                    int row0, int M, u8* __restrict__ sf_row0, int sf_row_stride,
                                    const StoreBox& store) {
  const int tid = threadIdx.x % 128, lane = tid % 32, w = tid / 32, q4 = lane % 4;
  if (tid == 0) bulk_wait_read();
  named_barrier_sync(bar_id, 128);
#pragma unroll
  for (int b = 0; b < 8; ++b)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const float v0 = d[4 * (2 * b) + 2 * h], v1 = d[4 * (2 * b) + 2 * h + 1];
      const float v2 = d[4 * (2 * b + 1) + 2 * h], v3 = d[4 * (2 * b + 1) + 2 * h + 1];
      float amax = fmaxf(fmaxf(fabsf(v0), fabsf(v1)), fmaxf(fabsf(v2), fabsf(v3)));
      amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, 1));
      amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, 2));
      const Nvfp4Scale sc = nvfp4_scale(amax, g);
      const u32 c0 = e2m1(v0 * sc.os) | (e2m1(v1 * sc.os) << 4);
      const u32 c1 = e2m1(v2 * sc.os) | (e2m1(v3 * sc.os) << 4);
      const int r = 16 * w + lane / 4 + 8 * h;
      u8* row = staging + r * 64;
      row[8 * b + q4] = static_cast<u8>(c0);
      row[8 * b + 4 + q4] = static_cast<u8>(c1);
      if (q4 == (b & 3) && row0 + r < M) sf_row0[static_cast<i64>(r) * sf_row_stride + b] = sc.sf;
    }
  fence_proxy_async_smem();
  named_barrier_sync(bar_id, 128);
  if (tid == 0) {
    store(staging);
    bulk_commit();
  }
}


template <int kOut>
struct EpiPreAttnQkv {
  PreAttnMath math;
  const float* __restrict__ act_scale;  // [M]
  const float* __restrict__ w_scale;    // [21504]
  const TmaDesc* desc[3];               // q, k, v outputs viewed as [M, columns]
  u8* sf_out[3];                        // NVFP4 scales [M, 56, 8] (kOut 2)
  PaKindScalar scalar[3];               // e4m3: descale; nvfp4: global scale

  template <int kAcc>
  H3_DEVICE void operator()(float (&d)[kAcc], int row0, int col0, u8* staging, int wg) const {
    static_assert(kAcc == 64, "one head (128 columns) per warpgroup fragment");
    const int lane = threadIdx.x % 32, w = (threadIdx.x % 128) / 32, q4 = lane % 4;
    const int M = math.M;
    // y = bf16((acc * act_scale[m]) * w_scale[n])
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int row = row0 + 16 * w + lane / 4 + 8 * h;
      const float as = row < M ? act_scale[row] : 0.f;
#pragma unroll
      for (int j = 0; j < 16; ++j) {
        const float2 ws = *reinterpret_cast<const float2*>(w_scale + col0 + 8 * j + 2 * q4);
        d[4 * j + 2 * h] = round_bf16((d[4 * j + 2 * h] * as) * ws.x);
        d[4 * j + 2 * h + 1] = round_bf16((d[4 * j + 2 * h + 1] * as) * ws.y);
      }
    }
    math.apply(d, row0, col0);
    const int kind = col0 / kPaKindCols, head = (col0 % kPaKindCols) / kPaHeadDim;
    const TmaDesc* dk = pick3(desc, kind);
    if constexpr (kOut == kPaOutBf16) {
      store_fragment_bf16(d, staging, wg, [&](int, int box, const u8* src) {
        tma_store_2d(dk, src, head * kPaHeadDim + 64 * box, row0);
      });
    } else if constexpr (kOut == kPaOutE4m3) {
      const float os = __frcp_rn(pick3(scalar, kind).get());
      store_fragment_e4m3(d, os, staging, wg,
                          [&](const u8* src) { tma_store_2d(dk, src, head * 128, row0); });
    } else {
      u8* sf0 = pick3(sf_out, kind) + (static_cast<i64>(row0) * kPaHeads + head) * 8;
      store_fragment_nvfp4(d, pick3(scalar, kind).get(), staging, wg, row0, M, sf0, kPaHeads * 8,
                           [&](const u8* src) { tma_store_2d(dk, src, head * 64, row0); });
    }
  }
};

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
      const float *sp_k, const float *sp_v, float sh_q, float sh_k, float sh_v, float qk_eps

#define H3_PA8_EPI                                                                        \
  const EpiPreAttnQkv<kOut> epi {                                                         \
    {q_w, k_w, cs, nullptr, 0, cs_rows, M, 1, qk_eps}, act_scale, w_scale,                \
        {&desc_q, &desc_k, &desc_v}, {sf_q, sf_k, sf_v}, {{sp_q, sh_q}, {sp_k, sh_k}, {sp_v, sh_v}} \
  }

// M > 256: clusters of two CTAs multicasting B.
template <int kOut>
__global__ void H3_CLUSTER_X2 __launch_bounds__(384, 1) pre_attention_fp8_x2_sm90(H3_PA8_PARAMS) {
  H3_PA8_EPI;
  gemm_sm90_body<1, 128, 1, 2>(desc_a, desc_b, M, 3 * kPaKindCols, k_bytes, epi);
}

template <int kOut>
__global__ void __launch_bounds__(384, 1) pre_attention_fp8_sm90(H3_PA8_PARAMS) {
  H3_PA8_EPI;
  gemm_sm90_body<1, 128, 1, 1>(desc_a, desc_b, M, 3 * kPaKindCols, k_bytes, epi);
}

#undef H3_PA8_EPI
#undef H3_PA8_PARAMS

}  // namespace h3
