#pragma once
// Thread control shared by every parallel loop. Results never depend on the thread count:
// each work unit is computed by one thread, with its own fixed reduction order.
#include <cstddef>

namespace attnum {
/// Sets the number of threads used by parallel loops (0 = all cores).
void set_threads(int n);
/// Returns the number of threads parallel loops use.
int threads();
}  // namespace attnum
