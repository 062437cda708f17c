// Hopper warpgroup MMA (wgmma, sm_90a only) and its shared-memory matrix descriptors.
//
// Operands are K-major tiles written by TMA with the 128-byte swizzle: rows of 128 bytes (64
// bf16 or 128 e4m3), 8-row groups 1024 bytes apart, tile bases 1024-byte aligned. The
// accumulator of m64nNk16 / m64nNk32 maps like the mma.sync C fragment per warp: warp w of the
// warpgroup owns rows 16w..16w+15, and d[4j + r] sits at (row 16w + mma_c_row(lane, r),
// column 8j + mma_c_col(lane, r)), j < N / 8.
// NOTE: compile- and SASS-checked in CI; a GPU test checks it against NumPy.
#pragma once
#include "h3/common.cuh"

namespace h3 {

// Matrix descriptor of a K-major, 128B-swizzled tile starting at shared address `smem_addr`:
// start >> 4 in bits 0-13, leading-dimension offset 1 (unused by swizzled K-major layouts),
// stride offset 1024 >> 4 in bits 32-45 (8 rows x 128 bytes), swizzle mode 1 (128B) in 62-63.
// Advancing K inside the 128-byte row is adding the byte offset to the start address.
H3_DEVICE u64 wgmma_desc_k128b(u32 smem_addr) {
  return static_cast<u64>((smem_addr & 0x3FFFF) >> 4) | (static_cast<u64>(1) << 16) |
         (static_cast<u64>(1024 >> 4) << 32) | (static_cast<u64>(1) << 62);
}

H3_DEVICE void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
H3_DEVICE void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
template <int kPending>
H3_DEVICE void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(kPending) : "memory");
}
// Keeps the compiler from moving reads of a wgmma fragment above the wait that completes it
// (the wgmma's register outputs are written asynchronously; the wait names no registers).
template <int kN>
H3_DEVICE void fence_fragment(float (&d)[kN]) {
#pragma unroll
  for (int i = 0; i < kN; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// Register budget of a warpgroup (needs __launch_bounds__(threads, 1)); sm_90a and sm_120a.
template <int kRegs>
H3_DEVICE void setmaxnreg_inc() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL) || defined(__CUDA_ARCH_FEAT_SM120_ALL)
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(kRegs));
#endif
}
template <int kRegs>
H3_DEVICE void setmaxnreg_dec() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL) || defined(__CUDA_ARCH_FEAT_SM120_ALL)
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(kRegs));
#endif
}

// Operand lists of the accumulator fragments (64 or 128 fp32 registers).
#define H3_F8(i) \
  "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]), \
      "+f"(d[i + 6]), "+f"(d[i + 7])
#define H3_F4(i) "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3])
#define H3_ACC8 H3_F8(0)
#define H3_ACC68 H3_ACC64, H3_F4(64)
#define H3_ACC64 \
  H3_F8(0), H3_F8(8), H3_F8(16), H3_F8(24), H3_F8(32), H3_F8(40), H3_F8(48), H3_F8(56)
#define H3_ACC96 H3_ACC64, H3_F8(64), H3_F8(72), H3_F8(80), H3_F8(88)
#define H3_ACC112 H3_ACC96, H3_F8(96), H3_F8(104)
#define H3_ACC128 H3_ACC112, H3_F8(112), H3_F8(120)
#define H3_REGS64 \
  "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
  "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, " \
  "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, " \
  "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
#define H3_REGS8 "%0, %1, %2, %3, %4, %5, %6, %7"
#define H3_REGS68 H3_REGS64 ", %64, %65, %66, %67"
#define H3_REGS96 H3_REGS64 \
  ", %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79" \
  ", %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95"
#define H3_REGS112 H3_REGS96 \
  ", %96, %97, %98, %99, %100, %101, %102, %103" \
  ", %104, %105, %106, %107, %108, %109, %110, %111"
#define H3_REGS128 H3_REGS112 \
  ", %112, %113, %114, %115, %116, %117, %118, %119" \
  ", %120, %121, %122, %123, %124, %125, %126, %127"

// One instruction: predicate p = (scale_d != 0); scale_d = 0 overwrites d instead of adding.
// bf16 takes immediate scale-a/b = 1 and no transposes (both K-major); FP8 has no transpose
// operands at all.
#define H3_WGMMA_ASM(SHAPE, REGS, ID_A, ID_B, ID_S, TAIL)                     \
  asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %" ID_S ", 0;\n"                  \
               " wgmma.mma_async.sync.aligned." SHAPE " {" REGS "}, %" ID_A ", %" ID_B \
               ", p, 1, 1" TAIL ";\n}"

// d (+)= A(desc) * B(desc)^T for one k-step of a 64 x kN tile; kFmt 0: bf16 (k16), 1: e4m3 (k32).
template <int kFmt, int kN>
H3_DEVICE void wgmma_step(float (&d)[kN / 2], u64 desc_a, u64 desc_b, int scale_d) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  static_assert(kN == 128 || kN == 192 || kN == 224 || kN == 256 ||
                    (kFmt == 0 && (kN == 16 || kN == 136)),
                "wgmma_step: N must be 128, 192, 224 or 256 (bf16 also 16 or 136)");
  if constexpr (kFmt == 0 && kN == 16) {
    H3_WGMMA_ASM("m64n16k16.f32.bf16.bf16", H3_REGS8, "8", "9", "10", ", 0, 0")
                 : H3_ACC8 : "l"(desc_a), "l"(desc_b), "r"(scale_d));
  } else if constexpr (kFmt == 0 && kN == 136) {
    H3_WGMMA_ASM("m64n136k16.f32.bf16.bf16", H3_REGS68, "68", "69", "70", ", 0, 0")
                 : H3_ACC68 : "l"(desc_a), "l"(desc_b), "r"(scale_d));
  } else if constexpr (kFmt == 0 && kN == 128) {
    H3_WGMMA_ASM("m64n128k16.f32.bf16.bf16", H3_REGS64, "64", "65", "66", ", 0, 0")
                 : H3_ACC64 : "l"(desc_a), "l"(desc_b), "r"(scale_d));
  } else if constexpr (kFmt == 0 && kN == 192) {
    H3_WGMMA_ASM("m64n192k16.f32.bf16.bf16", H3_REGS96, "96", "97", "98", ", 0, 0")
                 : H3_ACC96 : "l"(desc_a), "l"(desc_b), "r"(scale_d));
  } else if constexpr (kFmt == 0 && kN == 224) {
    H3_WGMMA_ASM("m64n224k16.f32.bf16.bf16", H3_REGS112, "112", "113", "114", ", 0, 0")
                 : H3_ACC112 : "l"(desc_a), "l"(desc_b), "r"(scale_d));
  } else if constexpr (kFmt == 0 && kN == 256) {
    H3_WGMMA_ASM("m64n256k16.f32.bf16.bf16", H3_REGS128, "128", "129", "130", ", 0, 0")
                 : H3_ACC128 : "l"(desc_a), "l"(desc_b), "r"(scale_d));
  } else if constexpr (kFmt == 1 && kN == 128) {
    H3_WGMMA_ASM("m64n128k32.f32.e4m3.e4m3", H3_REGS64, "64", "65", "66", "")
                 : H3_ACC64 : "l"(desc_a), "l"(desc_b), "r"(scale_d));
  } else if constexpr (kFmt == 1 && kN == 192) {
    H3_WGMMA_ASM("m64n192k32.f32.e4m3.e4m3", H3_REGS96, "96", "97", "98", "")
                 : H3_ACC96 : "l"(desc_a), "l"(desc_b), "r"(scale_d));
  } else if constexpr (kFmt == 1 && kN == 224) {
    H3_WGMMA_ASM("m64n224k32.f32.e4m3.e4m3", H3_REGS112, "112", "113", "114", "")
                 : H3_ACC112 : "l"(desc_a), "l"(desc_b), "r"(scale_d));
  } else {
    H3_WGMMA_ASM("m64n256k32.f32.e4m3.e4m3", H3_REGS128, "128", "129", "130", "")
                 : H3_ACC128 : "l"(desc_a), "l"(desc_b), "r"(scale_d));
  }
#else
  __trap();
#endif
}

#undef H3_WGMMA_ASM
#undef H3_ACC128
#undef H3_ACC112
#undef H3_ACC96
#undef H3_ACC64
#undef H3_ACC68
#undef H3_ACC8
#undef H3_F8
#undef H3_F4
#undef H3_REGS128
#undef H3_REGS112
#undef H3_REGS96
#undef H3_REGS64
#undef H3_REGS68
#undef H3_REGS8

}  // namespace h3
