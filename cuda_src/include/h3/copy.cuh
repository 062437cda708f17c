// Asynchronous global -> shared copies (cp.async, sm_80+) and ldmatrix.
// NOTE: every asm statement that touches shared memory carries a "memory" clobber, so the
// compiler cannot move ordinary shared-memory accesses across the copy, the commit or the wait
// (the cause of the wrong rows of the v5 prologue ring, benchmarks/NOTES.md).
#pragma once
#include "h3/common.cuh"

namespace h3 {

H3_DEVICE u32 smem_addr(const void* p) { return static_cast<u32>(__cvta_generic_to_shared(p)); }

// 16 bytes global -> shared, L1 bypassed; src_bytes < 16 zero-fills the rest (0 = all zeros,
// used for rows past the end of a matrix; the source address must still be valid).
H3_DEVICE void cp_async16(void* smem, const void* gmem, int src_bytes = 16) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(smem_addr(smem)), "l"(gmem),
               "r"(src_bytes)
               : "memory");
}

// 4 or 8 bytes global -> shared through L1 (.ca: only for data no one writes during the launch);
// src_bytes 0 writes zeros (the source address must still be valid). The epilogues' per-tile row
// and column vectors (h3/gemm_sm90.cuh, kVecBytes).
H3_DEVICE void cp_async4(void* smem, const void* gmem, int src_bytes = 4) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;" ::"r"(smem_addr(smem)), "l"(gmem),
               "r"(src_bytes)
               : "memory");
}

H3_DEVICE void cp_async8(void* smem, const void* gmem, int src_bytes = 8) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;" ::"r"(smem_addr(smem)), "l"(gmem),
               "r"(src_bytes)
               : "memory");
}

H3_DEVICE void cp_async_wait_all() { asm volatile("cp.async.wait_all;" ::: "memory"); }

// Shared-memory loads by 32-bit shared address (LDS; a generic pointer into shared memory
// compiles to the slower generic LD). Volatile with a memory clobber: they stay below the barrier
// that makes the data visible.
H3_DEVICE float lds_f32(u32 a) {
  float v;
  asm volatile("ld.shared.f32 %0, [%1];" : "=f"(v) : "r"(a) : "memory");
  return v;
}

H3_DEVICE float2 lds_f2(u32 a) {
  float2 v;
  asm volatile("ld.shared.v2.f32 {%0, %1}, [%2];" : "=f"(v.x), "=f"(v.y) : "r"(a) : "memory");
  return v;
}

H3_DEVICE u32 lds_u32(u32 a) {
  u32 v;
  asm volatile("ld.shared.u32 %0, [%1];" : "=r"(v) : "r"(a) : "memory");
  return v;
}

H3_DEVICE uint4 lds_u128(u32 a) {
  uint4 v;
  asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "r"(a)
               : "memory");
  return v;
}

H3_DEVICE void sts_u32(u32 a, u32 v) {
  asm volatile("st.shared.u32 [%0], %1;" ::"r"(a), "r"(v) : "memory");
}

// st.shared.u32 where `pred` holds (a predicated STS: no branch around the store)
H3_DEVICE void sts_u32_if(u32 a, u32 v, bool pred) {
  asm volatile(
      "{\n .reg .pred p;\n setp.ne.u32 p, %2, 0;\n @p st.shared.u32 [%0], %1;\n}" ::"r"(a),
      "r"(v), "r"(static_cast<u32>(pred))
      : "memory");
}

H3_DEVICE long long lds_s64(u32 a) {
  long long v;
  asm volatile("ld.shared.s64 %0, [%1];" : "=l"(v) : "r"(a) : "memory");
  return v;
}

H3_DEVICE void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }

template <int kPending>
H3_DEVICE void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(kPending) : "memory");
}

// Four 8x8 b16 matrices (8 rows of 16 bytes each) -> one 32-bit register each; lane l supplies
// the row address of row l % 8 of matrix l / 8 and receives word l % 4 of row l / 4 of each.
H3_DEVICE void ldmatrix_x4(u32 (&r)[4], const void* smem_row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(smem_row))
               : "memory");
}

}  // namespace h3
