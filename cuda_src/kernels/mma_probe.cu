// One warp, one MMA atom: D[16, 8] = A[16, K] * B[8, K]^T with the fragments gathered from
// row-major global A and B by the maps of mma_sync.cuh. Every kind uses 32 bytes of K per row
// (bf16 k16, e4m3 k32, packed e2m1 k64), so one byte-level map serves all four. A GPU test
// compares D with NumPy, which pins down the fragment maps the GEMM engine builds on; CI
// disassembles the cubins to check that each kind issues the tensor-core instruction it names.
#include "h3/mma_sm120.cuh"
#include "h3/mma_sync.cuh"

namespace h3 {

enum MmaProbeKind : int { kProbeBf16 = 0, kProbeE4m3 = 1, kProbeMxf8f6f4 = 2, kProbeMxf4nvf4 = 3 };

// A: [16][32] bytes, B: [8][32] bytes (row-major); D: [16][8] fp32.
// sfa / sfb: the scale registers of the block-scaled kinds (every lane passes the same word).
template <int kKind>
__global__ void __launch_bounds__(32) mma_probe_smxx(const u8* __restrict__ A,
                                                     const u8* __restrict__ B, u32 sfa, u32 sfb,
                                                     float* __restrict__ D) {
  const int lane = threadIdx.x, g = lane / 4, q = lane % 4;
  const u32* a32 = reinterpret_cast<const u32*>(A);  // 8 words per row
  const u32* b32 = reinterpret_cast<const u32*>(B);
  const u32 a[4] = {a32[g * 8 + q], a32[(g + 8) * 8 + q], a32[g * 8 + 4 + q],
                    a32[(g + 8) * 8 + 4 + q]};
  const u32 b[2] = {b32[g * 8 + q], b32[g * 8 + 4 + q]};
  float d[4] = {0.f, 0.f, 0.f, 0.f};
  if constexpr (kKind == kProbeBf16) {
    mma_bf16_16816(d, a, b);
  } else if constexpr (kKind == kProbeE4m3) {
    mma_e4m3_16832(d, a, b);
  } else if constexpr (kKind == kProbeMxf8f6f4) {
    mma_mxf8f6f4_e4m3_16832(d, a, b, sfa, sfb);
  } else {
    mma_mxf4nvf4_16864(d, a, b, sfa, sfb);
  }
#pragma unroll
  for (int r = 0; r < 4; ++r) D[mma_c_row(lane, r) * 8 + mma_c_col(lane, r)] = d[r];
}

}  // namespace h3
