#include "attnum/core/error.h"

#include <cstdio>
#include <cstdlib>
#include <mutex>

namespace attnum {
namespace {
std::function<std::string()>& context_fn() {
  static std::function<std::string()> f;
  return f;
}
std::function<void(int)>& exit_fn() {
  static std::function<void(int)> f;
  return f;
}
}  // namespace

void set_internal_error_context(std::function<std::string()> context, std::function<void(int)> before_exit) {
  context_fn() = std::move(context);
  exit_fn() = std::move(before_exit);
}

namespace detail {
void assert_fail(const char* file, int line, const std::string& msg) {
  static std::mutex once;
  once.lock();  // never unlocked: the process ends below
  std::fflush(stdout);
  std::fprintf(stderr, "%s:%d: internal error: %s\n", file, line, msg.c_str());
  if (context_fn()) {
    try {
      const std::string ctx = context_fn()();
      std::fprintf(stderr, "%s", ctx.c_str());
    } catch (...) {
      std::fprintf(stderr, "(the command line and settings could not be formatted)\n");
    }
  }
  std::fprintf(stderr,
               "This is a bug in attnum, not a problem with your input: please report it with the "
               "command and settings above.\n");
  std::fflush(stderr);
  if (exit_fn()) exit_fn()(kInternalErrorStatus);
  std::_Exit(kInternalErrorStatus);
}
}  // namespace detail
}  // namespace attnum
