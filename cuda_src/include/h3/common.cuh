// Common types and macros for every h3cupy kernel. No toolkit headers: NVRTC ships none of
// cuda_bf16.h / cuda_fp8.h, so raw bit types and inline PTX stand in for them.
#pragma once

namespace h3 {

using u8 = unsigned char;
using u16 = unsigned short;
using u32 = unsigned int;
using u64 = unsigned long long;
using i64 = long long;

// bf16 values travel as their raw 16 bits.
using bf16_t = u16;

#define H3_DEVICE __device__ __forceinline__

template <typename T>
H3_DEVICE constexpr T ceil_div(T a, T b) {
  return (a + b - 1) / b;
}

// 16-byte vector load / store (callers guarantee 16-byte alignment).
H3_DEVICE uint4 ld16(const void* p) { return *reinterpret_cast<const uint4*>(p); }
H3_DEVICE void st16(void* p, uint4 v) { *reinterpret_cast<uint4*>(p) = v; }

// NOTE: streaming loads for data read exactly once (x rows): evict-first keeps the small,
// reused AdaLN tables in L2.
H3_DEVICE uint4 ld16_stream(const void* p) {
  uint4 v;
  asm volatile("ld.global.cs.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}

// Programmatic dependent launch (sm_90+; nothing elsewhere). griddep_wait: block until the
// grids this launch depends on have completed and their writes are visible (at once when the
// launch was not programmatic). griddep_launch_dependents: the next kernel in the stream, if
// launched programmatically, may be scheduled from now on (it still waits for this grid's end
// before reading anything: see griddep_wait).
H3_DEVICE void griddep_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
H3_DEVICE void griddep_launch_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// The launch's dynamic shared memory must cover the layout the kernel carves out of it. The host
// mirrors each layout (h3cupy/ops/gemm.py's plans); a mirror that falls short would let the ring
// or the vectors run past the allocation, hidden while the 1 KiB alignment slack absorbs it (as
// in session 18). One special-register read and a uniform compare per thread, before any work.
H3_DEVICE void require_dynamic_smem(u32 bytes) {
  u32 have;
  asm volatile("mov.u32 %0, %%dynamic_smem_size;" : "=r"(have));
  if (have < bytes) __trap();
}

}  // namespace h3
