#include "attnum/core/run_info.h"

#include <chrono>
#include <ctime>
#include <fstream>

#include "attnum/core/parallel.h"
#include "attnum/core/version.h"

namespace attnum {
namespace {
std::string& recorded() {
  static std::string s;
  return s;
}
// An argument as a POSIX shell reads it back: bare when it holds only safe characters, else in
// single quotes (a quote inside written '\'').
std::string shell_quoted(const std::string& a) {
  const bool bare = !a.empty() && a.find_first_not_of(
                                      "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                      "0123456789_-+=/.,:@%") == std::string::npos;
  if (bare) return a;
  std::string q = "'";
  for (char c : a) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}
}  // namespace

void set_command_line(int argc, const char* const* argv) {
  std::string s;
  for (int i = 0; i < argc; ++i) {
    if (i) s += ' ';
    s += shell_quoted(argv[i]);
  }
  recorded() = s;
}

const std::string& command_line() { return recorded(); }

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);) {
    // x86: "model name : ..."; AArch64 has no model name line.
    if (line.rfind("model name", 0) == 0) {
      const size_t colon = line.find(':');
      if (colon == std::string::npos) break;
      const size_t b = line.find_first_not_of(" \t", colon + 1);
      return b == std::string::npos ? std::string("unknown") : line.substr(b);
    }
  }
  return "unknown";
}

std::string utc_now() {
  const std::time_t t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

nlohmann::json run_info(const nlohmann::json& isa_paths) {
  return {{"utc_time", utc_now()},
          {"command_line", command_line()},
          {"tool_version", std::string(tool_version())},
          {"git_commit", std::string(git_commit())},
          {"isa_paths", isa_paths},
          {"cpu_model", cpu_model()},
          {"threads", threads()}};
}

}  // namespace attnum
