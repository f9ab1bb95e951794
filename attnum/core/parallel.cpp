#include "attnum/core/parallel.h"

#include <fmt/core.h>
#include <omp.h>

#include "attnum/core/error.h"

namespace attnum {
void set_threads(int n) {
  if (n < 0) fail("--threads {}: expected 0 (all cores) or a positive count", n);
  const int cores = omp_get_num_procs();
  if (n > cores) {
    fmt::print(stderr, "note: --threads {} capped at this machine's {} cores\n", n, cores);
    n = cores;
  }
  omp_set_num_threads(n > 0 ? n : cores);
}
int threads() { return omp_get_max_threads(); }
}  // namespace attnum
