// The pre-attention epilogue math shared by the pre-attention kernels (SPEC.md sections 3, 4):
// per row and head of Q and K, r = bf16(y), RMSNorm with the per-head weight, partial NeoX RoPE of
// dims [0, 96) from the (cache, position) pair; V untouched. Works in place on a consumer
// warpgroup's wgmma fragment (h3/gemm_sm90.cuh layout): a 128-column slice of the tile is one
// (kind, head) in engine column order [kind, head, dim].
#pragma once
#include "h3/common.cuh"
#include "h3/numeric.cuh"
#include "h3/quant.cuh"

namespace h3 {

constexpr int kPaHeads = 56, kPaHeadDim = 128, kPaKindCols = kPaHeads * kPaHeadDim;  // 7168

// The wgmma epilogues' math hands the bf16 stores packed words (PreAttnMath::apply's kPack;
// the same bytes as unpacked, 2-7% fewer instructions, the default since session 30). The timing
// build without the math (-DH3_PA_NOMATH) stores unpacked values.
#ifdef H3_PA_NOMATH
constexpr bool kPaPack = false;
#else
constexpr bool kPaPack = true;
#endif

// One output kind's scalar (e4m3 descale or NVFP4 global scale): a one-element device array read
// here (no host sync), or a host value.
struct PaKindScalar {
  const float* ptr;
  float host;
  H3_DEVICE float get() const { return ptr != nullptr ? *ptr : host; }
};

// a[kind] without a runtime-indexed array (which would live in local memory)
template <class T>
H3_DEVICE T pick3(const T (&a)[3], int kind) {
  return kind == 0 ? a[0] : (kind == 1 ? a[1] : a[2]);
}

// A thread's row-dependent operands of the per-head math for one fragment (Q or K): for each of
// its two rows, the RoPE cos / sin words (bf16 pairs) of dims 8 jj + 2 (l % 4) + {0, 1}, jj < 6.
// PreAttnMath::load issues them at once, so that their latencies overlap (one memory round trip
// per tile), possibly long before the epilogue needs them. The RMSNorm weight (256 bytes per kind,
// read by every warp of every tile) is read where it is used: it stays in L1.
struct PaOperands {
  u32 c[2][6], s[2][6];
};

// The per-head math of the epilogue on a consumer warpgroup's fragment (wgmma layout), in place:
// Q/K RMSNorm + RoPE; V untouched (the store's bf16 conversion is its rounding).
struct PreAttnMath {
  const bf16_t* __restrict__ q_w;   // [128]
  const bf16_t* __restrict__ k_w;   // [128]
  const bf16_t* __restrict__ cs;    // [S, 96]
  const void* __restrict__ pos;     // int32 / int64 [M], or nullptr for p = m
  int pos_is_64, cs_rows, M, hp;
  float qk_eps;

  H3_DEVICE int position(int row) const {
#ifdef H3_PA_CS0
    // timing only (scripts/probe_engine.py --ab pacs0): every row reads cache row 0, which stays
    // in L1, so the RoPE operands' load latency drops out; wrong outputs
    return 0;
#endif
    if (row >= M) return 0;
    i64 p = row;
    if (pos != nullptr)
      p = pos_is_64 ? static_cast<const i64*>(pos)[row] : static_cast<const int*>(pos)[row];
    // NOTE: clamped on the device (SPEC: positions outside [0, S) use the nearest row).
    return static_cast<int>(p < 0 ? 0 : (p >= cs_rows ? cs_rows - 1 : p));
  }

  // The cache rows of this thread's two rows (row0 + 16 w + l / 4 + 8 h) of a fragment.
  H3_DEVICE void positions(int row0, int (&p)[2]) const {
    const int lane = threadIdx.x % 32, w = (threadIdx.x % 128) / 32;
#pragma unroll
    for (int h = 0; h < 2; ++h) p[h] = position(row0 + 16 * w + lane / 4 + 8 * h);
  }

  // Issue the loads of the operands of a fragment at columns col0.. (nothing for V): row half h
  // (load_half), or both.
  H3_DEVICE void load_half(PaOperands& o, const int (&p)[2], int col0, int h) const {
    const int q4 = threadIdx.x % 4;
    if (col0 / kPaKindCols >= 2) return;
    const bf16_t* csr = cs + static_cast<i64>(p[h]) * 96 + 2 * q4;
#pragma unroll
    for (int jj = 0; jj < 6; ++jj) {
      o.c[h][jj] = *reinterpret_cast<const u32*>(csr + 8 * jj);
      o.s[h][jj] = *reinterpret_cast<const u32*>(csr + 48 + 8 * jj);
    }
  }
  H3_DEVICE void load(PaOperands& o, const int (&p)[2], int col0) const {
    load_half(o, p, col0, 0);
    load_half(o, p, col0, 1);
  }

  // The math on a fragment at columns col0.. (kAcc / 64 heads of one kind) with its loaded
  // operands (positions p). kRounded: d already holds bf16 values (a scaling policy rounded y), so
  // r = y. kLoad: 0, o holds both rows' operands; 1, o holds the first row's only and the second
  // row's are loaded here, so that they arrive during the first row's math (loaded with the
  // first, they spilled the three-warpgroup FP8 kernel); 2, each row's are loaded here at the
  // start of its math (the BF16 kernel: with any loaded by the caller, ptxas spilled three words
  // of the 256-column kernel, session 20). kHead >= 0: only that head of the fragment (nothing
  // when the fragment has fewer heads), so that a caller can store one head while the next one's
  // math runs; with kLoad = 2 each call loads its rows' operands again (L1 hits).
  // kPack (kPaPack in the wgmma epilogues): each pair's final values leave as one packed bf16 word in
  // the pair's first float (its bits; the second is dead), for a store that reads them so
  // (store_fragment_bf16's kPacked): the last rounding is then the store's conversion, without
  // the unpack and the store's second conversion. V heads are packed too.
  template <bool kRounded, int kLoad, int kHead = -1, bool kPack = false, int kAcc>
  H3_DEVICE void apply(float (&d)[kAcc], int col0, PaOperands& o, const int (&p)[2]) const {
    constexpr int kHeads = kAcc / 64;  // 128-column heads in the tile
    static_assert(kHead < 0 || kLoad != 1, "one head at a time: kLoad 0 or 2");
    if constexpr (kHead >= kHeads) return;
    const int kind = col0 / kPaKindCols, q4 = threadIdx.x % 4;
    if (kind >= 2) {
      if constexpr (kPack) {  // V = bf16(y)
#pragma unroll
        for (int hd = kHead < 0 ? 0 : kHead; hd < (kHead < 0 ? kHeads : kHead + 1); ++hd)
#pragma unroll
          for (int i = 64 * hd; i < 64 * hd + 64; i += 2)
            d[i] = __uint_as_float(cvt_bf16x2(d[i], d[i + 1]));
      }
      return;
    }
    const bf16_t* g = kind == 0 ? q_w : k_w;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      if (kLoad == 2 || (kLoad == 1 && h == 1)) load_half(o, p, col0, h);
#pragma unroll
      for (int hd = kHead < 0 ? 0 : kHead; hd < (kHead < 0 ? kHeads : kHead + 1); ++hd) {
        auto at = [&](int jj, int e) -> float& { return d[4 * (16 * hd + jj) + 2 * h + e]; };
        float ss = 0.f;
#pragma unroll
        for (int jj = 0; jj < 16; ++jj) {
          if constexpr (!kRounded) round_bf16x2(at(jj, 0), at(jj, 1));
#pragma unroll
          for (int e = 0; e < 2; ++e) ss = __fmaf_rn(at(jj, e), at(jj, e), ss);
        }
        ss += __shfl_xor_sync(0xffffffffu, ss, 1);
        ss += __shfl_xor_sync(0xffffffffu, ss, 2);
        const float rstd = rsqrtf(ss * (1.f / kPaHeadDim) + qk_eps);
#pragma unroll
        for (int jj = 0; jj < 16; ++jj) {
          const u32 gw = *reinterpret_cast<const u32*>(g + 8 * jj + 2 * q4);
          at(jj, 0) = (at(jj, 0) * rstd) * __uint_as_float(gw << 16);
          at(jj, 1) = (at(jj, 1) * rstd) * __uint_as_float(gw & 0xffff0000u);
          if (kPack && jj >= 12) {  // dims 96-127: n is the output
            at(jj, 0) = __uint_as_float(cvt_bf16x2(at(jj, 0), at(jj, 1)));
          } else {
            round_bf16x2(at(jj, 0), at(jj, 1));
          }
        }
#pragma unroll
        for (int jj = 0; jj < 6; ++jj) {
          const u32 cw = o.c[h][jj], sw = o.s[h][jj];
          const float c[2] = {__uint_as_float(cw << 16), __uint_as_float(cw & 0xffff0000u)};
          const float s[2] = {__uint_as_float(sw << 16), __uint_as_float(sw & 0xffff0000u)};
          float lo[2], hi[2];
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const float a = at(jj, e), b = at(jj + 6, e);
            lo[e] = __fmaf_rn(a, c[e], -(b * s[e]));
            hi[e] = __fmaf_rn(b, c[e], a * s[e]);
          }
          if constexpr (kPack) {
            at(jj, 0) = __uint_as_float(cvt_bf16x2(lo[0], lo[1]));
            at(jj + 6, 0) = __uint_as_float(cvt_bf16x2(hi[0], hi[1]));
            continue;
          }
          round_bf16x2(lo[0], lo[1]);
          round_bf16x2(hi[0], hi[1]);
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            at(jj, e) = lo[e];
            at(jj + 6, e) = hi[e];
          }
        }
      }
    }
  }
};

// The pre-attention math on the mma.sync back end (h3/gemm_mma_tma.cuh: 8 warps of 64 x 64 on a
// 128 x 256 tile). A head's 128 columns are split over two warps (wn = 0, 64 or 128, 192), so the
// sum of squares and the RoPE partners that sit in the other warp (d in [16, 48) with d + 48) go
// through the scratch shared memory; everything else is in the thread. Stores are bf16 pairs
// straight into the pack.
struct MmaPreAttnMath {
  const bf16_t* __restrict__ q_w;
  const bf16_t* __restrict__ k_w;
  const bf16_t* __restrict__ cs;
  const void* __restrict__ pos;
  int pos_is_64, cs_rows, M;
  float qk_eps;

  H3_DEVICE int position(int row) const {
    if (row >= M) return 0;
    i64 p = row;
    if (pos != nullptr)
      p = pos_is_64 ? static_cast<const i64*>(pos)[row] : static_cast<const int*>(pos)[row];
    return static_cast<int>(p < 0 ? 0 : (p >= cs_rows ? cs_rows - 1 : p));
  }

  // In place on the warp's 64 x 64 block; `scratch`: kScratch bytes of shared memory (8, 16 or
  // 32 KiB: the RoPE exchange runs in kScratch / 8 KiB-row-block rounds), all 256 threads.
  template <int kScratch>
  H3_DEVICE void apply(float (&acc)[4][8][4], int row0, int col0, int wm, int wn,
                       u8* scratch) const {
    const int lane = threadIdx.x % 32, q4 = lane % 4, warp = threadIdx.x / 32;
    const int kind = col0 / kPaKindCols;
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
      // Normalize; then, in rounds of kRoundMi 16-row blocks, publish the columns the partner
      // warp needs for RoPE (half 0 its dims [16, 48) = ni 2..5, half 1 its dims [64, 96) = ni
      // 0..3: 16 rows x 32 dims per warp and row block, 8 KiB over the 8 warps) and rotate.
      constexpr int kRoundMi = kScratch / 8192;
      static_assert(kRoundMi == 1 || kRoundMi == 2 || kRoundMi == 4, "8, 16 or 32 KiB");
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
            acc[mi][ni][2 * h] =
                round_bf16((acc[mi][ni][2 * h] * rstd[mi][h]) * __uint_as_float(gw << 16));
            acc[mi][ni][2 * h + 1] = round_bf16((acc[mi][ni][2 * h + 1] * rstd[mi][h]) *
                                                __uint_as_float(gw & 0xffff0000u));
          }
#pragma unroll
      for (int r0 = 0; r0 < 4 / kRoundMi; ++r0) {
        const int m0 = r0 * kRoundMi;
#pragma unroll
        for (int j = 0; j < kRoundMi; ++j)
#pragma unroll
          for (int h = 0; h < 2; ++h)
#pragma unroll
            for (int ni = 0; ni < 8; ++ni) {  // (ni0 is not a constant: no acc[.][ni0 + i])
              const int mi = m0 + j;
              const int rr = 16 * j + lane / 4 + 8 * h, cc = 8 * (ni - ni0) + 2 * q4;
              if (ni >= ni0 && ni < ni0 + 4)
                *reinterpret_cast<u32*>(xbuf + (warp * 16 * kRoundMi + rr) * 32 + cc) =
                    pack_bf16x2(f32_to_bf16(acc[mi][ni][2 * h]),
                                f32_to_bf16(acc[mi][ni][2 * h + 1]));
            }
        __syncthreads();
        // the partner warp's columns of this round's rows
        const bf16_t* pbuf = xbuf + (warp ^ 1) * 16 * kRoundMi * 32;
#pragma unroll
        for (int j = 0; j < kRoundMi; ++j)
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const int mi = m0 + j;
            // rr: the row in the warp's block; pr: the row in pbuf
            const int rr = 16 * mi + lane / 4 + 8 * h, pr = 16 * j + lane / 4 + 8 * h;
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
                  const float hi = bf16_to_f32(pbuf[pr * 32 + (d - 16)]);
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
                  const float lo = bf16_to_f32(pbuf[pr * 32 + (d - 64)]);
                  acc[mi][ni][2 * h + e] = round_bf16(__fmaf_rn(hi, c_at(d - 48), lo * c_at(d)));
                }
            }
          }
        __syncthreads();  // the exchange buffer is free again (next round, next tile)
      }
    }
  }
};

// The quantized pre-attention epilogue on the mma.sync fragment layout (h3/gemm_mma_tma.cuh and
// h3/gemm_nvfp4.cuh): y = Scale (bf16-rounded: h3/gemm_mma_tma.cuh's MmaYAlpha / MmaYRowCol), the per-head
// math, then the out mode (kOut 0 bf16, 1 e4m3, 2 nvfp4) into q, k, v [M, 56, ...]. Stores are
// straight from registers: bf16 pairs, e4m3 pairs, and for NVFP4 one code byte per thread per 8
// columns (a 16-column block sits in the 4 lanes of a quad: two shuffles give its amax) plus the
// scale byte from lane q4 == block % 4. kScratch: the skeleton's scratch bytes (MmaPreAttnMath).
template <int kOut, class Scale, int kScratch>
struct EpiMmaPreAttnQkv {
  MmaPreAttnMath math;
  Scale scale;
  void* out[3];             // q, k, v: bf16 / e4m3 [M, 56, 128] or packed e2m1 [M, 56, 64]
  u8* sf[3];                // NVFP4 scales [M, 56, 8] (kOut 2)
  PaKindScalar scalar[3];   // e4m3: descale; nvfp4: global scale

  H3_DEVICE void operator()(float (&acc)[4][8][4], int row0, int col0, int wm, int wn,
                            u8* scratch) const {
    scale(acc, row0, col0, wm, wn);
    math.template apply<kScratch>(acc, row0, col0, wm, wn, scratch);
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

}  // namespace h3
