#include "attnum/core/progress.h"

#include <fmt/core.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>

namespace attnum {
namespace {
std::atomic<progress_mode> g_mode{progress_mode::automatic};
}

void set_progress_mode(progress_mode m) { g_mode = m; }
progress_mode get_progress_mode() { return g_mode.load(); }

bool progress_wanted() {
  switch (g_mode.load()) {
    case progress_mode::always:
      return true;
    case progress_mode::never:
      return false;
    case progress_mode::automatic:
      break;
  }
  return ::isatty(STDERR_FILENO) == 1;
}

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const auto s = static_cast<int64_t>(std::llround(seconds));
  if (s >= 3600) return fmt::format("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60);
  return fmt::format("{}:{:02}", s / 60, s % 60);
}

namespace {
// The singular of a plural unit name ("windows" -> "window"), for "one window: ...".
std::string singular(const std::string& unit) {
  return unit.size() > 1 && unit.back() == 's' ? unit.substr(0, unit.size() - 1) : unit;
}
}  // namespace

std::string progress_text(const std::string& what, int64_t done, int64_t total, double elapsed, const std::string& unit,
                          bool bar) {
  constexpr int kWidth = 30;
  const double frac = total > 0 ? std::clamp(static_cast<double>(done) / static_cast<double>(total), 0.0, 1.0) : 1.0;
  const int fill = static_cast<int>(frac * kWidth);
  std::string line = fmt::format("{} {:3.0f}% ", what, 100 * std::floor(frac * 100) / 100);
  if (bar) line += fmt::format("[{}{}] ", std::string(fill, '#'), std::string(kWidth - fill, '.'));
  line += fmt::format("{}/{} {}", done, total, unit);
  if (done > 0 && elapsed > 0) {
    // One unit for the rate whatever its size: units per second, three significant digits.
    const double rate = static_cast<double>(done) / elapsed;
    line += fmt::format("  {} {}/s", rate >= 100 ? fmt::format("{:.0f}", rate) : fmt::format("{:.3g}", rate), unit);
    line += fmt::format("  elapsed {}  left {}", format_duration(elapsed),
                        format_duration(static_cast<double>(total - done) / rate));
  } else {
    line += fmt::format("  elapsed {}", format_duration(elapsed));
  }
  return line;
}

std::string progress_header(const std::string& what, int64_t total, const std::string& unit,
                            const std::string& unit_help) {
  std::string line = fmt::format("{}: {} {} to do", what, total, unit);
  if (!unit_help.empty()) line += fmt::format(" (one {}: {})", singular(unit), unit_help);
  return line;
}

bool progress_log_due(int64_t done, int64_t total, int64_t last_done, double seconds_since_last) {
  if (done >= total) return true;
  if (last_done < 0 || seconds_since_last >= 10) return true;
  const int64_t step = std::max<int64_t>(1, (total + 19) / 20);
  return done - last_done >= step;
}

progress::progress(std::string what, int64_t total, std::string unit, bool enabled, std::string unit_help)
    : what_(std::move(what)),
      unit_(std::move(unit)),
      unit_help_(std::move(unit_help)),
      total_(total),
      enabled_(enabled && progress_wanted()),
      terminal_(::isatty(STDERR_FILENO) == 1),
      start_(clock::now()),
      last_(start_) {
  if (enabled_ && !terminal_) {
    fmt::print(stderr, "{}\n", progress_header(what_, total_, unit_, unit_help_));
    std::fflush(stderr);
  }
}

progress::~progress() {
  if (drawn_ && !finished_) finish();
}

void progress::update(int64_t done) {
  if (!enabled_) return;
  const std::lock_guard<std::mutex> lock(mutex_);
  done_ = std::max(done_, done);
  const auto now = clock::now();
  const bool end = done_ >= total_;
  if (finished_) return;
  if (terminal_) {
    if (!end && drawn_ && now - last_ < std::chrono::milliseconds(100)) return;
  } else if (!progress_log_due(done_, total_, logged_done_, std::chrono::duration<double>(now - last_).count())) {
    return;
  }
  last_ = now;
  draw(done_, end);
}

void progress::add(int64_t n) {
  if (!enabled_) return;
  int64_t d;
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    d = done_ + n;
  }
  update(d);
}

void progress::finish() {
  if (!enabled_) return;
  const std::lock_guard<std::mutex> lock(mutex_);
  if (finished_) return;
  if (!drawn_ || done_ < total_) draw(done_, true);
}

void progress::draw(int64_t done, bool final) {
  const double elapsed = std::chrono::duration<double>(clock::now() - start_).count();
  if (terminal_) {
    // \r and clear to the end of the line: a shorter line leaves nothing of the previous one.
    fmt::print(stderr, "\r{}\x1b[K{}", progress_text(what_, done, total_, elapsed, unit_), final ? "\n" : "");
  } else {
    fmt::print(stderr, "{}\n", progress_text(what_, done, total_, elapsed, unit_, false));
    logged_done_ = done;
  }
  std::fflush(stderr);
  drawn_ = true;
  finished_ = final;
}

}  // namespace attnum
