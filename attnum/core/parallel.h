#pragma once
// Thread control shared by every parallel loop. Results never depend on the thread count:
// each work unit is computed by one thread, with its own fixed reduction order.
#include <atomic>
#include <cstddef>
#include <exception>
#include <mutex>
#include <utility>
#include <vector>

namespace attnum {
/// Sets the number of threads used by parallel loops (0 = all cores). Negative: attnum::error.
/// More than the machine's cores: capped at the core count, with a notice on stderr (more
/// threads than cores only add contention, and tens of thousands overflow the runtime's stacks).
void set_threads(int n);
/// Returns the number of threads parallel loops use.
int threads();

/// Work in groups (a layer's heads) of n_items each (their row tiles), shared by the threads of a
/// parallel region: every thread of the region calls this with its thread number. Thread t takes
/// the items of group t mod groups first (its data stays in its core's cache) and, when they run
/// out, what is left of the other groups in turn; f(g, i) runs once for every group g and item i
/// (next[g] counts g's items handed out: all 0 before the region). Which thread runs an item
/// varies from run to run, so f must give the same result on any thread.
template <typename F>
void take_home_first(std::vector<std::atomic<int>>& next, int n_items, int thread, F&& f) {
  const int groups = static_cast<int>(next.size());
  for (int k = 0; k < groups; ++k) {
    const int g = (thread + k) % groups;
    for (int i; (i = next[g].fetch_add(1, std::memory_order_relaxed)) < n_items;) f(g, i);
  }
}

/// Carries exceptions out of an OpenMP region (an exception escaping a region's structured
/// block calls std::terminate): each iteration runs its body through run(); after the region,
/// rethrow() throws the first exception caught, as the caller would have seen it serially.
class worker_errors {
 public:
  template <typename F>
  void run(F&& body) noexcept {
    if (failed_.load(std::memory_order_relaxed)) return;  // an earlier iteration failed: skip the rest of the work
    try {
      std::forward<F>(body)();
    } catch (...) {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!first_) first_ = std::current_exception();
      failed_.store(true, std::memory_order_relaxed);
    }
  }
  /// Throws the first exception caught by run(), if any.
  void rethrow() const {
    if (first_) std::rethrow_exception(first_);
  }

 private:
  std::mutex mutex_;
  std::exception_ptr first_;
  std::atomic<bool> failed_{false};  // first_ is read after the region's barrier
};
}  // namespace attnum
