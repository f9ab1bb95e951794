#pragma once
// Errors: bad input throws attnum::error (cli/main.cpp prints it and exits 2); bugs hit
// ATTNUM_ASSERT, which stays on in release builds: it prints the failed check, the command and
// settings the tool registered (set_internal_error_context) and a request to report the bug, and
// ends the process with exit status 3 (kInternalErrorStatus), from any thread.
#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <functional>
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

/// Exit status after an internal error (a bug in attnum), distinct from bad input's 2.
inline constexpr int kInternalErrorStatus = 3;

/// What an internal error prints after the failed check: `context` returns lines naming the
/// command line and the settings (called once, at the error); `before_exit` runs just before the
/// process ends (the tool's MPI ranks: abort the others). Either may be empty.
void set_internal_error_context(std::function<std::string()> context, std::function<void(int)> before_exit = {});

namespace detail {
/// Reports a failed ATTNUM_ASSERT on stderr and exits with kInternalErrorStatus. The first thread
/// to fail reports; any other that fails meanwhile waits for the exit.
[[noreturn]] void assert_fail(const char* file, int line, const std::string& msg);
}  // namespace detail
}  // namespace attnum

/// A bug check that stays on in every build.
#define ATTNUM_ASSERT(cond, ...)                                                              \
  do {                                                                                        \
    if (!(cond)) ::attnum::detail::assert_fail(__FILE__, __LINE__, fmt::format(__VA_ARGS__)); \
  } while (0)

#ifndef NDEBUG
#define ATTNUM_DASSERT(cond, ...) ATTNUM_ASSERT(cond, __VA_ARGS__)
#else
#define ATTNUM_DASSERT(cond, ...) ((void)0)
#endif
