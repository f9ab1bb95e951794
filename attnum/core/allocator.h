#pragma once
// Process-wide allocator settings for a numerics tool that allocates and frees buffers of
// megabytes per head (scores, probabilities, outputs, packed operands).

namespace attnum {

/// With glibc's defaults every free of a block above the (dynamic) mmap threshold unmaps it, and
/// free memory above 128 KiB at the top of a heap is given back: the next head then faults its
/// pages in again, one kernel trap per 4 KiB page. Inside a virtual machine, where a page fault
/// is expensive, that cost exceeded the arithmetic: the fp64 reference ran at 0.20 of the fp64
/// GEMM rate with the defaults and at 0.72 with these settings (`attnum bench attention`,
/// docs/design.md, Performance). tune_allocator() keeps blocks below 32 MiB in the heap and
/// keeps up to 256 MiB of freed memory per arena for reuse. Results do not depend on it (only
/// where the memory comes from). Called once by the CLI's main and by the Python module's init;
/// a no-op without glibc, and when ATTNUM_MALLOC_DEFAULTS=1 is set (to measure the difference).
void tune_allocator();

}  // namespace attnum
