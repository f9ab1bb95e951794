#pragma once
// Force-included first into every translation unit by GCC before 13 (CMakeLists.txt): GCC 12's
// AVX-512 intrinsic headers declare `__m512 __Y = __Y;` as the "undefined" operand of masked
// intrinsics, and once those inline into Eigen's kernels, -Wmaybe-uninitialized reports
// "'__Y' may be used uninitialized" hundreds of times per file (GCC bug 105593, a false positive,
// fixed in GCC 13). Including the intrinsic headers here, with that one warning off, marks their
// lines ignored and nothing else: our own code keeps the warning.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop
