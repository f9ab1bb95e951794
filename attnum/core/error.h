#pragma once
// Errors: bad input throws attnum::error (cli/main.cpp prints it and exits 2); bugs hit
// ATTNUM_ASSERT, which stays on in release builds.
#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>

namespace attnum {

/// Bad input (files, flags, values): the message names the file, the field and what was expected.
class error : public std::runtime_error {
 public:
  explicit error(const std::string& what) : std::runtime_error(what) {}
};

/// Throws attnum::error with an fmt-formatted message.
template <typename... Args>
[[noreturn]] void fail(fmt::format_string<Args...> f, Args&&... args) {
  throw error(fmt::format(f, std::forward<Args>(args)...));
}

namespace detail {
[[noreturn]] inline void assert_fail(const char* file, int line, const std::string& msg) {
  std::fprintf(stderr, "%s:%d: internal error: %s\n", file, line, msg.c_str());
  std::abort();
}
}  // namespace detail
}  // namespace attnum

/// A bug check that stays on in every build.
#define ATTNUM_ASSERT(cond, ...)                                                        \
  do {                                                                                  \
    if (!(cond)) ::attnum::detail::assert_fail(__FILE__, __LINE__, fmt::format(__VA_ARGS__)); \
  } while (0)

#ifndef NDEBUG
#define ATTNUM_DASSERT(cond, ...) ATTNUM_ASSERT(cond, __VA_ARGS__)
#else
#define ATTNUM_DASSERT(cond, ...) ((void)0)
#endif
