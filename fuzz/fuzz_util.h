#pragma once
// Shared by the libFuzzer targets (scripts/fuzz): inputs become files (the readers take paths),
// and the only acceptable failure is attnum::error, the clear "bad input" error. Anything else
// (another exception, a crash, a sanitizer report, a hang) is a finding.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

#include "attnum/core/error.h"

namespace attnum::fuzz {

/// A private scratch folder for this fuzzing process.
inline const std::filesystem::path& scratch() {
  static const std::filesystem::path d = [] {
    auto p = std::filesystem::temp_directory_path() / ("attnum-fuzz-" + std::to_string(::getpid()));
    std::filesystem::create_directories(p);
    return p;
  }();
  return d;
}

/// Writes bytes to scratch()/name and returns the path.
inline std::string put(const std::string& name, std::string_view bytes) {
  const auto p = scratch() / name;
  std::filesystem::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary | std::ios::trunc).write(bytes.data(), std::streamsize(bytes.size()));
  return p.string();
}

/// Runs `body`; attnum::error is the expected outcome of bad input, anything else aborts.
template <typename F>
void expect_clean(F&& body) {
  try {
    body();
  } catch (const attnum::error&) {
  } catch (const std::exception& e) {
    std::fprintf(stderr, "finding: exception other than attnum::error: %s\n", e.what());
    std::abort();
  }
}

}  // namespace attnum::fuzz
