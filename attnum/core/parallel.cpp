#include "attnum/core/parallel.h"

#include <omp.h>

namespace attnum {
void set_threads(int n) { omp_set_num_threads(n > 0 ? n : omp_get_num_procs()); }
int threads() { return omp_get_max_threads(); }
}  // namespace attnum
