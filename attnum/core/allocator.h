#pragma once
// Process-wide allocator settings for a numerics tool that allocates and frees buffers of
// megabytes per head (scores, probabilities, outputs, packed operands).
#include <memory>
#include <new>
#include <utility>

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

/// std::allocator, except that a vector's resize(n) leaves new elements default-initialised
/// (uninitialised for float and the like) rather than zeroed: for buffers of megabytes every
/// element of which is written before it is read, where the zero fill was a pass over memory of
/// its own (1-2% of a two-head `attnum.attend`).
template <typename T>
struct no_init_allocator : std::allocator<T> {
  template <typename U>
  struct rebind {
    using other = no_init_allocator<U>;
  };
  using std::allocator<T>::allocator;
  template <typename U, typename... Args>
  void construct(U* p, Args&&... args) {
    if constexpr (sizeof...(Args) == 0)
      ::new (static_cast<void*>(p)) U;
    else
      ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
};

}  // namespace attnum
