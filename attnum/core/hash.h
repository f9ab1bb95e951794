#pragma once
// FNV-1a 64 (Fowler/Noll/Vo): the project's one content hash (source files of models and
// tokenizers, study inputs). Not cryptographic: it names what a result was computed from.
#include <cstddef>
#include <cstdint>
#include <string>

#include <fmt/format.h>

namespace attnum::core {

/// FNV-1a 64 offset basis and prime.
inline constexpr uint64_t kFnvOffset = 14695981039346656037ULL, kFnvPrime = 1099511628211ULL;

/// Returns the FNV-1a 64 hash of n bytes, continuing from `h` (chain calls to hash pieces).
inline uint64_t fnv1a64(const void* data, size_t n, uint64_t h = kFnvOffset) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * kFnvPrime;
  return h;
}

/// Returns the hash as 16 lowercase hex digits.
inline std::string fnv1a_hex(const void* data, size_t n) { return fmt::format("{:016x}", fnv1a64(data, n)); }

}  // namespace attnum::core
