#pragma once
// Files every layer writes and reads: atomic writes (a killed run never leaves a half-written
// result), whole-file reads with errors that name the file, names inside a folder that cannot
// leave it, allocation limits, output folders that a failed run leaves as it found them, and
// the completion marker that says a result folder is finished (docs/reliability.md).
#include <cstdint>
#include <filesystem>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace attnum {

/// Writes `bytes` to `path` atomically: a temp file `PATH.tmp.PID` in the same folder (created
/// if needed), flushed and fsynced, then renamed over `path`. Throws attnum::error naming the
/// path and the system's reason (e.g. "Permission denied").
void write_file_atomic(const std::filesystem::path& path, std::string_view bytes);

/// Returns the whole content of a regular file. A folder, FIFO or device is refused without
/// blocking. Throws attnum::error naming the path.
std::string read_file(const std::filesystem::path& path);

/// Throws attnum::error unless `path` is a regular file (opened without blocking, so a FIFO
/// never hangs the caller); `what` names the role ("--q", "tokenizer").
void require_regular_file(const std::filesystem::path& path, std::string_view what = "");

/// Returns dir / name for a file named inside another file of `dir` (a shard in
/// model.safetensors.index.json, a tokenizer file): `name` must be a relative path without
/// ".." components, so the result never leaves `dir`. Throws attnum::error naming `field`.
std::filesystem::path path_inside(const std::filesystem::path& dir, const std::string& name,
                                  std::string_view field);

/// The largest single allocation attnum tries: the machine's physical memory, or
/// ATTNUM_MAX_ALLOC_GIB when set lower.
uint64_t max_alloc_bytes();

/// Throws attnum::error "WHAT needs N GiB, more than the limit of M GiB" when `bytes` exceeds
/// max_alloc_bytes() (checked before the allocation is tried). Saturates on overflow: pass
/// checked_mul's result.
void check_alloc(uint64_t bytes, std::string_view what);

/// Returns a * b, or UINT64_MAX when the product overflows.
uint64_t checked_mul(uint64_t a, uint64_t b);

/// Name of the completion marker a finished result folder holds (written last).
inline constexpr const char* kCompleteMarker = "complete.json";

/// Writes dir/complete.json (atomically, last): the command, the tool version and the FNV-1a
/// hash and size of every other regular file in `dir` (not checkpoints/).
void write_complete_marker(const std::filesystem::path& dir, const std::string& command);

/// Throws attnum::error naming `dir` unless it holds a completion marker whose hashes match
/// the files (`what` is the command that refuses: "report", "merge", "transfer").
void require_complete(const std::filesystem::path& dir, std::string_view what);

/// Prepares a result folder for a new or resumed run: removes stale temp files `*.tmp.PID` left
/// by killed processes (a live writer's stay). An earlier completion marker stays: a run that
/// changes a finished file without writing a new marker fails the marker's hash check.
void begin_output_dir(const std::filesystem::path& dir);

/// A folder for this process's own scratch files: temp_directory_path() / "attnum-NAME-PID"
/// (not created here). First removes the stale ones of dead processes: folders attnum-NAME-PID
/// of the same NAME whose PID no longer runs. Guard the folder with an output_guard so that a
/// failed run removes it too.
std::filesystem::path private_temp_dir(std::string_view name);

/// A run's output (folder or file) that a failed run leaves as it found it: what did not exist
/// when the guard was made is removed by the destructor unless commit() was called; files and
/// folders that existed (an earlier run's checkpoints, which resume needs) stay.
class output_guard {
 public:
  explicit output_guard(std::filesystem::path path);
  ~output_guard();
  output_guard(const output_guard&) = delete;
  output_guard& operator=(const output_guard&) = delete;
  /// The run succeeded: keep everything.
  void commit() { committed_ = true; }

 private:
  std::filesystem::path path_;
  bool existed_ = false, committed_ = false;
  std::set<std::string> before_;  // relative paths under a folder that existed
};

/// Runs `write` (which writes result files into `dir`) under an output_guard, after
/// begin_output_dir, then writes the completion marker: the end of every command that writes a
/// result folder. Nothing happens when `dir` is empty.
template <typename F>
void write_result_dir(const std::filesystem::path& dir, const std::string& command, F&& write) {
  if (dir.empty()) return;
  output_guard guard(dir);
  begin_output_dir(dir);
  write();
  write_complete_marker(dir, command);
  guard.commit();
}

}  // namespace attnum
