#pragma once
// exp2f over arrays, bit-identical to the C library's scalar exp2f (glibc 2.28+ on x86-64 with
// FMA), so the engine's P = exp2f(...) can be vectorised without changing one output bit.
//
// glibc's exp2f (Szabolcs Nagy's algorithm; the __exp2f_fma ifunc variant on FMA machines) works
// in double: x = k/32 + r with |r| <= 1/64 (k from adding 1.5*2^47 and reading the low bits),
// 2^(k/32) = table[k%32] with the exponent k/32 added into its bits, 2^r by a cubic
// y = fma(fma(r, C0, C1), r*r, fma(r, C2, 1)), result float(y * s). The AVX-512, AVX2 (+FMA) and
// NEON (AArch64, where glibc's generic exp2f compiles to the same fused operations) paths repeat
// those exact double operations (same constants, same fused multiply-adds; AVX2 reads the table
// with a gather, NEON by index), lanes with |x| >= 128, Inf or NaN go to the scalar exp2f. The
// path follows the runtime ISA choice (isa.h). Because a different libm could round differently, the first
// call checks the vector path against std::exp2f on a fixed input set and falls back to scalar
// exp2f for good if any bit differs (exp2f_vector_active() reports which path runs).
// tests/attention/perf_exp2_test.cpp checks it on dense samples, perf_exp2_slow_test.cpp on
// every float in (-128, 128).

namespace attnum::attention::fast {

/// out[i] = std::exp2f(in[i]) for i < n, bit for bit. in and out may alias.
void exp2f_array(const float* in, float* out, int n);

/// out[i] = std::exp2f(std::fmaf(x[i], a, b)) for i < n, bit for bit (one pass instead of two).
void exp2f_fma_array(const float* x, float a, float b, float* out, int n);

/// Returns true when exp2f_array uses a vector path (it passed its self-check on this libm).
bool exp2f_vector_active();

/// The path exp2f_array runs now: "avx512", "avx2", "neon" or "scalar".
const char* exp2f_path();

}  // namespace attnum::attention::fast
