#pragma once
// Running shell commands and the built tool from tests: exit status and captured output.
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

namespace attnum::test {

struct run_result {
  int status = -1;  ///< exit status; 128 + signal when killed; -1 when the shell did not start
  std::string out;  ///< what the command wrote (stderr too where asked for)
};

/// Runs `cmd` through the shell and returns its status and standard output. Append " 2>&1" to the
/// command to capture standard error as well (run_attnum does that unless told otherwise).
inline run_result run_command(const std::string& cmd) {
  run_result r;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  const int st = pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : (WIFSIGNALED(st) ? 128 + WTERMSIG(st) : -1);
  return r;
}

/// Runs the built tool (ATTNUM_BINARY) with `args`; standard error joins the output unless
/// `stderr_too` is false (then it is discarded, so JSON on stdout parses alone).
inline run_result run_attnum(const std::string& args, bool stderr_too = true) {
  return run_command(std::string(ATTNUM_BINARY) + " " + args + (stderr_too ? " 2>&1" : " 2>/dev/null"));
}

/// A result file's text for comparing two runs: the file as written, except meta.json without its
/// "run" block (the time, command line and machine of the run that wrote it).
inline std::string comparable_result(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  if (p.filename() != "meta.json") return s.str();
  auto j = nlohmann::json::parse(s.str(), nullptr, false);
  if (j.is_discarded() || !j.is_object()) return s.str();
  j.erase("run");
  return j.dump(2);
}

}  // namespace attnum::test
