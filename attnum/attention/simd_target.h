#pragma once
// The target attributes of the engine's run-time dispatched vector kernels (isa.h): each kernel
// carries its ISA in an attribute (no file-wide -m flags) and runs only when isa::active() picked
// a path that has it. ATTNUM_SIMD_KERNELS is 0 where the kernels are not built (not x86-64, old
// compilers): the callers then report "no kernel" and the engine takes its scalar loops.
#if defined(__x86_64__) && (defined(__clang__) || __GNUC__ >= 9)
#define ATTNUM_SIMD_KERNELS 1
// (GCC 12's warnings inside its own intrinsic headers are switched off for those headers alone
// by the force-included core/gcc12_intrinsics.h.)
#include <immintrin.h>
#define ATTNUM_AVX2_FN __attribute__((target("avx2,fma")))
#define ATTNUM_AVX512_FN __attribute__((target("avx2,fma,avx512f,avx512dq,avx512bw,avx512vl")))
// The micro-kernels' loops over rows and vectors unrolled, so their accumulators stay in
// registers (GCC 12 otherwise keeps a copy of them on the stack, stored at every k).
#define ATTNUM_UNROLL _Pragma("GCC unroll 16")
#else
#define ATTNUM_SIMD_KERNELS 0
#endif
// AArch64: the Advanced SIMD (NEON) kernels, built wherever the compiler targets AArch64 (NEON is
// part of the base architecture, so no attribute is needed).
#if defined(__aarch64__) && defined(__ARM_NEON)
#define ATTNUM_NEON_KERNELS 1
#include <arm_neon.h>
#define ATTNUM_UNROLL _Pragma("GCC unroll 16")
#else
#define ATTNUM_NEON_KERNELS 0
#endif
