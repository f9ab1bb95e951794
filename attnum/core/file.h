#pragma once
// Files every layer writes and reads: atomic writes (a killed run never leaves a half-written
// result), whole-file reads with errors that name the file, names inside a folder that cannot
// leave it, allocation limits, output folders that a failed run leaves as it found them, and
// the completion marker that says a result folder is finished (docs/reliability.md).
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json_fwd.hpp>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace attnum {

/// This process's random run token (16 hex digits, drawn once): it names the temp files the run
/// writes and is recorded in the lock file of every result folder the run writes into, so that a
/// later run removes a killed run's temp files by that record, never by a name pattern.
const std::string& run_token();

/// The suffix of this run's temp files: ".attnum-tmp-TOKEN".
std::string temp_suffix();

/// Writes `bytes` to `path` atomically: a temp file `PATH.attnum-tmp-TOKEN` (run_token) in the
/// same folder (created if needed), flushed and fsynced, then renamed over `path`. The path is
/// recorded as written by this run (an output_guard of a failed run removes it). Throws
/// attnum::error naming the path and the system's reason (e.g. "Permission denied").
void write_file_atomic(const std::filesystem::path& path, std::string_view bytes);

/// A file written atomically in pieces (one too large to hold in memory): the same temp file,
/// fsync and rename as write_file_atomic, which is this writer given one piece. Until commit()
/// nothing appears at `path`; a writer destroyed uncommitted (an error, a kill) removes its temp
/// file. Throws attnum::error naming the path and the system's reason.
class atomic_file_writer {
 public:
  explicit atomic_file_writer(const std::filesystem::path& path);
  atomic_file_writer(const atomic_file_writer&) = delete;
  atomic_file_writer& operator=(const atomic_file_writer&) = delete;
  ~atomic_file_writer();
  /// Appends n bytes.
  void write(const void* data, size_t n);
  /// Flushes, fsyncs and renames the temp file over the path (recorded as written by this run).
  void commit();

 private:
  std::filesystem::path path_;
  std::string tmp_;
  std::FILE* f_ = nullptr;
};

/// Returns the whole content of a regular file. A folder, FIFO or device is refused without
/// blocking. A file of more than `max_bytes` (when given) is refused by its size before it is
/// read, and one that grows past it while being read is refused too. Throws attnum::error naming
/// the path.
std::string read_file(const std::filesystem::path& path, uint64_t max_bytes = UINT64_MAX);

/// Throws attnum::error unless `path` is a regular file (opened without blocking, so a FIFO
/// never hangs the caller); `what` names the role ("--q", "tokenizer").
void require_regular_file(const std::filesystem::path& path, std::string_view what = "");

/// Limits of every JSON file attnum reads back (result folders, checkpoints, shards, markers,
/// model configs): nesting depth and size.
inline constexpr int kMaxJsonDepth = 64;
inline constexpr uint64_t kMaxJsonBytes = uint64_t{1} << 30;  // 1 GiB

/// Parses JSON text whose nesting (arrays and objects) is at most `max_depth` levels (checked by
/// a linear scan before parsing, so no later recursive dump or compare can overflow the stack).
/// Throws attnum::error "LABEL: not valid JSON: ..." or "LABEL: JSON nested deeper than N
/// levels"; quoted text is clipped to ~200 bytes.
nlohmann::json parse_json_text(std::string_view text, std::string_view label, int max_depth = kMaxJsonDepth);

/// Reads a JSON file with read_file's guards (regular files only, never blocking) and the
/// limits above (kMaxJsonBytes, kMaxJsonDepth); every error names the file.
nlohmann::json read_json(const std::filesystem::path& path);

/// Returns `s`, or its first `max` bytes followed by "... (N bytes)" when longer: the most of a
/// value an error message quotes.
std::string clip(std::string_view s, size_t max = 200);

/// Returns dir / name for a file named inside another file of `dir` (a shard in
/// model.safetensors.index.json, a tokenizer file): `name` must be a relative path without
/// ".." components, so the result never leaves `dir`. Throws attnum::error naming `field`.
std::filesystem::path path_inside(const std::filesystem::path& dir, const std::string& name, std::string_view field);

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
/// hash and size of every other regular file in `dir` and in dir/checkpoints/ (named
/// "checkpoints/NAME"), so that a shard folder's checkpoints are verified by merge.
void write_complete_marker(const std::filesystem::path& dir, const std::string& command);

/// Throws attnum::error naming `dir` unless it holds a completion marker whose hashes match
/// the files (`what` is the command that refuses: "report", "merge", "transfer").
void require_complete(const std::filesystem::path& dir, std::string_view what);

/// Name of the lock file every result folder holds while (and after) a run writes into it.
inline constexpr const char* kLockFile = ".attnum-lock";

/// True for the names attnum keeps out of a folder's result files: the lock file, the marker
/// and temp files (NAME.attnum-tmp-TOKEN).
bool is_bookkeeping_file(const std::string& name);

/// Prepares a result folder for a new or resumed run (created if missing): takes an exclusive
/// lock on DIR/.attnum-lock until the run's output_guard commits (the lock file is then removed)
/// or the process exits (a second run into the folder is refused naming it), then removes the temp files of the runs
/// recorded in the lock file (they hold no lock, so they are dead) and records this run's token. Nothing else is
/// removed. An earlier completion marker stays: a run that changes a finished file without writing a new marker fails
/// the marker's hash check. Call it on the process that writes the folder only.
void begin_output_dir(const std::filesystem::path& dir);

/// Throws attnum::error "FLAG PATH is inside (or is) the input INPUT" when `out` equals or lies
/// inside one of `inputs` (files or folders the run reads; empty ones are skipped), comparing
/// resolved paths (symlinks followed, missing tails kept).
void require_out_outside_inputs(const std::filesystem::path& out, const std::vector<std::filesystem::path>& inputs,
                                std::string_view flag = "--out");

/// A folder for this process's own scratch files: temp_directory_path() / "attnum-NAME-TOKEN"
/// (not created here: begin_output_dir creates and locks it). First removes the stale ones of
/// killed runs: folders attnum-NAME-X whose lock file records the token X and is not locked.
/// Guard the folder with an output_guard so that a failed run removes it too.
std::filesystem::path private_temp_dir(std::string_view name);

/// A run's output (folder or file) that a failed run leaves as it found it: the files this run
/// wrote (write_file_atomic, the lock file) that did not exist when the guard was made are
/// removed by the destructor unless commit() was called, then the folders that became empty and
/// did not exist before. Files of other processes and files that existed (an earlier run's
/// checkpoints, which resume needs) stay.
class output_guard {
 public:
  explicit output_guard(std::filesystem::path path);
  ~output_guard();
  output_guard(const output_guard&) = delete;
  output_guard& operator=(const output_guard&) = delete;
  /// The run succeeded: keep everything, and release the folder's lock (begin_output_dir),
  /// removing its lock file: a finished folder holds only results.
  void commit();

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
