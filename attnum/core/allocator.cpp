#include "attnum/core/allocator.h"

#include <cstdlib>
#include <cstring>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace attnum {

void tune_allocator() {
#if defined(__GLIBC__)
  const char* keep = std::getenv("ATTNUM_MALLOC_DEFAULTS");
  if (keep && std::strcmp(keep, "1") == 0) return;
  // 32 MiB is glibc's largest accepted mmap threshold on 64-bit (HEAP_MAX_SIZE / 2); blocks
  // above it (whole layers, model weights) are still mapped and unmapped directly.
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 256 << 20);
#endif
}

}  // namespace attnum
