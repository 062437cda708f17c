// Block-scaled mma.sync atoms of sm_120a (GB202: RTX 5090 / RTX PRO 6000). Fragments of A, B, C
// and D as in mma_sync.cuh (e4m3 k32 byte layout; packed e2m1 k64 uses the same bytes).
//
//   kind::mxf8f6f4, scale_vec::1X, ue8m0: one scale byte per row of A / column of B for the
//     whole k32 step. With every scale byte 0x7F (= 2^0) it computes exactly the legacy e4m3
//     product (SPEC section 6: fp8_mma_form 2 is bitwise identical to form 0).
//   kind::mxf4nvf4, scale_vec::4X, ue4m3: four scale bytes per row / column (one per 16 values
//     of the k64 step), packed in one 32-bit register.
// Which lanes supply which rows' scales is selected by the {byte-id, thread-id} operands; the
// atoms take them as template arguments so each call site states its choice.
// NOTE: compile-checked for sm_120a in CI (tests/test_sass.py finds OMMA/QMMA in the SASS); no
// SM120 board has run them here.
#pragma once
#include "h3/common.cuh"

#if defined(__CUDA_ARCH_FEAT_SM120_ALL) || defined(__CUDA_ARCH_FEAT_SM121_ALL)
#define H3_HAS_SM120_MMA 1
#else
#define H3_HAS_SM120_MMA 0
#endif

namespace h3 {

constexpr u32 kUnitUe8m0x4 = 0x7F7F7F7Fu;  // four ue8m0 scale bytes of 2^0

template <int kByteIdA = 0, int kThreadIdA = 0, int kByteIdB = 0, int kThreadIdB = 0>
H3_DEVICE void mma_mxf8f6f4_e4m3_16832(float (&d)[4], const u32 (&a)[4], const u32 (&b)[2],
                                       u32 sfa, u32 sfb) {
#if H3_HAS_SM120_MMA
  asm volatile(
      "mma.sync.aligned.kind::mxf8f6f4.block_scale.scale_vec::1X.m16n8k32.row.col.f32.e4m3.e4m3."
      "f32.ue8m0 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3}, %10, {%12, %13}, %11, "
      "{%14, %15};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "r"(sfa), "r"(sfb),
        "h"(static_cast<u16>(kByteIdA)), "h"(static_cast<u16>(kThreadIdA)),
        "h"(static_cast<u16>(kByteIdB)), "h"(static_cast<u16>(kThreadIdB)));
#else
  __trap();
#endif
}

template <int kByteIdA = 0, int kThreadIdA = 0, int kByteIdB = 0, int kThreadIdB = 0>
H3_DEVICE void mma_mxf4nvf4_16864(float (&d)[4], const u32 (&a)[4], const u32 (&b)[2], u32 sfa,
                                  u32 sfb) {
#if H3_HAS_SM120_MMA
  asm volatile(
      "mma.sync.aligned.kind::mxf4nvf4.block_scale.scale_vec::4X.m16n8k64.row.col.f32.e2m1.e2m1."
      "f32.ue4m3 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3}, %10, {%12, %13}, %11, "
      "{%14, %15};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "r"(sfa), "r"(sfb),
        "h"(static_cast<u16>(kByteIdA)), "h"(static_cast<u16>(kThreadIdA)),
        "h"(static_cast<u16>(kByteIdB)), "h"(static_cast<u16>(kThreadIdB)));
#else
  __trap();
#endif
}

}  // namespace h3
