#pragma once
// The one progress line of every long command (heads, study, loss, capture, pcast simulate):
//   heads  42% [############.................] 118/280 units  3.1 units/s  elapsed 0:38  left 0:52
// on stderr. On a terminal it is redrawn in place at most 10 times a second (and at the end).
// Into a file or pipe (--progress) it is a log: a first line saying what is counted and what one
// unit is, then one plain line (no bar, no carriage return, no escape code) at most every 10 s or
// every 5% of the total, whichever comes first, and the final line. The rate is always units per
// second. Drawn only when stderr is a terminal, unless the user asked for it (--progress) or
// against it (--quiet).
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>

namespace attnum {

/// When progress lines are drawn: on a terminal (default), always (--progress), never (--quiet).
enum class progress_mode { automatic, always, never };
/// Sets the process-wide mode (the CLI's global --quiet / --progress flags).
void set_progress_mode(progress_mode m);
progress_mode get_progress_mode();
/// Returns whether progress lines are drawn under the current mode (automatic: stderr is a tty).
bool progress_wanted();

/// Formats seconds as M:SS, or H:MM:SS from an hour on ("?" when not finite).
std::string format_duration(double seconds);

/// Returns the line for `done` of `total` units after `elapsed` seconds: percentage, bar (unless
/// `bar` is false), count, rate in units per second, elapsed and remaining time (rate = done /
/// elapsed; count only this run's units, not those resumed from checkpoints).
std::string progress_text(const std::string& what, int64_t done, int64_t total, double elapsed, const std::string& unit,
                          bool bar = true);

/// Returns the first line of a log: "<what>: <total> <unit> to do (one <unit>: <unit_help>)".
std::string progress_header(const std::string& what, int64_t total, const std::string& unit,
                            const std::string& unit_help);

/// When a log line is due: at the end, 10 s after the last line, or 5% of the total (at least one
/// unit) after the last line's count.
bool progress_log_due(int64_t done, int64_t total, int64_t last_done, double seconds_since_last);

/// A progress line. Thread-safe: update() may be called from any thread (e.g. inside OpenMP loops).
class progress {
 public:
  /// `enabled` false draws nothing (a command's own --quiet); else progress_wanted() decides.
  /// `unit_help` says what one unit is (the log's first line).
  progress(std::string what, int64_t total, std::string unit = "units", bool enabled = true,
           std::string unit_help = {});
  ~progress();
  progress(const progress&) = delete;
  progress& operator=(const progress&) = delete;

  /// Records that `done` of the total units are done (monotone).
  void update(int64_t done);
  /// Adds n finished units.
  void add(int64_t n = 1);
  /// Draws the final line and a newline (also done by the destructor if anything was drawn).
  void finish();
  bool enabled() const { return enabled_; }

 private:
  void draw(int64_t done, bool final);
  using clock = std::chrono::steady_clock;
  std::string what_, unit_, unit_help_;
  int64_t total_, done_ = 0, logged_done_ = -1;
  bool enabled_, terminal_, drawn_ = false, finished_ = false;
  clock::time_point start_, last_;
  std::mutex mutex_;
};

}  // namespace attnum
