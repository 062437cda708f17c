// Warp-level mma.sync atoms (sm_80+ bf16, sm_89+ e4m3) and the fragment maps every back end
// shares. Lane l of a warp: g = l / 4 (group), q = l % 4 (thread in group).
//
//   C/D m16n8 fp32, 4 registers:  d[0], d[1] -> (row g,     col 2q, 2q+1)
//                                  d[2], d[3] -> (row g + 8, col 2q, 2q+1)
//   bf16 m16n8k16: A 4 x b32 (2 bf16 each, low half = lower column):
//       a[0] (row g,   k 2q..2q+1)    a[1] (row g+8, k 2q..2q+1)
//       a[2] (row g,   k 2q+8..+9)    a[3] (row g+8, k 2q+8..+9)
//     B ("col", stored [N][K]) 2 x b32: b[0] (n g, k 2q..2q+1), b[1] (n g, k 2q+8..+9)
//   e4m3 m16n8k32: the same with 4 bytes per register (byte j = lower column + j):
//       a[0] (row g, k 4q..4q+3)  a[1] (row g+8, k 4q..)  a[2] (row g, k 4q+16..)  a[3] (row g+8, k 4q+16..)
//       b[0] (n g, k 4q..4q+3)    b[1] (n g, k 4q+16..4q+19)
// NOTE: one byte layout serves e4m3 k32 and packed e2m1 k64 (two nibbles per byte, even element in
// the low nibble), so the NVFP4 operands load exactly like FP8 ones.
#pragma once
#include "h3/common.cuh"

namespace h3 {

// (row, col) of accumulator register r (0..3) of lane `lane` in a 16x8 tile
H3_DEVICE int mma_c_row(int lane, int r) { return lane / 4 + 8 * (r / 2); }
H3_DEVICE int mma_c_col(int lane, int r) { return 2 * (lane % 4) + (r % 2); }

// d += a * b, bf16 inputs, fp32 accumulate (sm_80+)
H3_DEVICE void mma_bf16_16816(float (&d)[4], const u32 (&a)[4], const u32 (&b)[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
      "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// d += a * b, e4m3 inputs, fp32 accumulate (sm_89+)
H3_DEVICE void mma_e4m3_16832(float (&d)[4], const u32 (&a)[4], const u32 (&b)[2]) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 "
      "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#else
  __trap();  // FP8 paths are refused on older targets by the Python layer
#endif
}

// d += a * b, f16 inputs, fp32 accumulate (sm_80+)
H3_DEVICE void mma_f16_16816(float (&d)[4], const u32 (&a)[4], const u32 (&b)[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
      "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// Four e4m3 bytes -> two f16x2 (bytes 0-1 -> lo, bytes 2-3 -> hi); exact (e4m3 is a subset of f16).
H3_DEVICE void e4m3x4_to_f16x2x2(u32 v, u32& lo, u32& hi) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(lo) : "h"(static_cast<u16>(v & 0xffff)));
  asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(hi) : "h"(static_cast<u16>(v >> 16)));
#else
  lo = hi = 0;
  __trap();
#endif
}

// An e4m3 m16n8k32 fragment as the two f16 m16n8k16 fragments of the same product, with K
// permuted identically for A and B (byte j of a k32 register is k 4q + j; bytes 0-1 become the
// f16 fragment's k 2q..2q+1, bytes 2-3 its k 2q+8..+9). Targets without an FP8 mma.sync (sm_90)
// convert once per fragment instead of once per MMA.
H3_DEVICE void e4m3_frag_a_to_f16(const u32 (&a)[4], u32 (&lo)[4], u32 (&hi)[4]) {
  // k 0-15 (a[0], a[1]) -> lo; k 16-31 (a[2], a[3]) -> hi
  e4m3x4_to_f16x2x2(a[0], lo[0], lo[2]);
  e4m3x4_to_f16x2x2(a[1], lo[1], lo[3]);
  e4m3x4_to_f16x2x2(a[2], hi[0], hi[2]);
  e4m3x4_to_f16x2x2(a[3], hi[1], hi[3]);
}

H3_DEVICE void e4m3_frag_b_to_f16(const u32 (&b)[2], u32 (&lo)[2], u32 (&hi)[2]) {
  e4m3x4_to_f16x2x2(b[0], lo[0], lo[1]);
  e4m3x4_to_f16x2x2(b[1], hi[0], hi[1]);
}

}  // namespace h3
