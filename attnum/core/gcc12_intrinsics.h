#pragma once
// Force-included first into every translation unit by GCC before 13 (CMakeLists.txt): GCC 12's
// AVX-512 intrinsic headers declare `__m512 __Y = __Y;` as the "undefined" operand of masked
// intrinsics, and once those inline into Eigen's kernels, -Wmaybe-uninitialized reports
// "'__Y' may be used uninitialized" hundreds of times per file (GCC bug 105593, a false positive,
// fixed in GCC 13); where AVX-512 is not the build's baseline (-march=znver3, -march=x86-64-v3)
// and the intrinsics inline into functions with an AVX-512 target attribute, the same line is
// reported as -Wuninitialized ("'__Y' is used uninitialized"). Including the intrinsic headers
// here, with those two warnings off, marks their lines ignored and nothing else: our own code
// keeps both warnings. x86 only (CMakeLists.txt includes
// it on x86 builds alone; the guard keeps it harmless elsewhere).
#if defined(__x86_64__) || defined(__i386__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop
#endif
