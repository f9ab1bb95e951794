#pragma once
// Helpers for the io tests: a per-test temp folder and raw file writing.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "attnum/core/error.h"

namespace io_test {

inline std::string temp_dir() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  const auto dir =
      std::filesystem::temp_directory_path() / ("attnum_io_" + std::to_string(::getpid()) + "_" + info->name());
  std::filesystem::create_directories(dir);
  return dir.string();
}

inline void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// An empty folder `prefix-<pid>-name` under the temp directory (removed first if it exists).
inline std::filesystem::path fresh_dir(const std::string& prefix, const std::string& name) {
  const auto d = std::filesystem::temp_directory_path() / (prefix + "-" + std::to_string(::getpid()) + "-" + name);
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  return d;
}

// Writes `s` to `p`, creating its folder.
inline void put(const std::filesystem::path& p, const std::string& s) {
  std::filesystem::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary) << s;
}

// The message of the attnum::error that f() throws ("" when it throws none).
inline std::string error_text(auto&& f) {
  try {
    f();
  } catch (const attnum::error& e) {
    return e.what();
  }
  return "";
}

inline std::string read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

template <typename T>
std::string raw(const T& v) {
  return std::string(reinterpret_cast<const char*>(&v), sizeof(T));
}

/// Expects `fn` to throw attnum::error whose message contains every one of `parts`.
template <typename Fn>
void expect_error(Fn fn, std::initializer_list<std::string> parts) {
  try {
    fn();
    ADD_FAILURE() << "no error thrown";
  } catch (const std::exception& e) {
    for (const auto& p : parts)
      EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what() << " lacks " << p;
  }
}

}  // namespace io_test
