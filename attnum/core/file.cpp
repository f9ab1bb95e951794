#include "attnum/core/file.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <random>
#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "attnum/core/error.h"
#include "attnum/core/hash.h"
#include "attnum/core/version.h"

namespace attnum {
namespace fs = std::filesystem;

const std::string& run_token() {
  static const std::string token = [] {
    uint64_t r = 0;
    if (::getrandom(&r, sizeof r, 0) != static_cast<ssize_t>(sizeof r)) {
      std::random_device rd;
      r = (uint64_t(rd()) << 32) ^ rd() ^ uint64_t(::getpid());
    }
    return fmt::format("{:016x}", r);
  }();
  return token;
}

std::string temp_suffix() { return ".attnum-tmp-" + run_token(); }

namespace {
// What this run wrote (absolute, lexically normal paths): the files an output_guard of a failed
// run may remove.
std::mutex g_written_mu;
std::set<std::string>& written_paths() {
  static std::set<std::string> s;
  return s;
}
std::string norm(const fs::path& p) {
  std::error_code ec;
  fs::path a = fs::absolute(p, ec);
  if (ec) a = p;
  std::string s = a.lexically_normal().string();
  while (s.size() > 1 && s.back() == '/') s.pop_back();
  return s;
}
void record_written(const fs::path& p) {
  std::lock_guard<std::mutex> l(g_written_mu);
  written_paths().insert(norm(p));
}
}  // namespace

atomic_file_writer::atomic_file_writer(const fs::path& path) : path_(path) {
  std::error_code ec;
  if (path.has_parent_path() && !fs::is_directory(path.parent_path())) {
    fs::create_directories(path.parent_path(), ec);
    if (ec) fail("{}: cannot create folder {}: {}", path.string(), path.parent_path().string(), ec.message());
  }
  // The run token keeps concurrent writers (ranks, shards) from sharing a temp file and lets a
  // later run know the temp file for its own kind (begin_output_dir).
  tmp_ = path.string() + temp_suffix();
  f_ = std::fopen(tmp_.c_str(), "wb");
  if (!f_) fail("{}: cannot write (temp file {}): {}", path.string(), tmp_, std::strerror(errno));
}

atomic_file_writer::~atomic_file_writer() {
  if (!f_) return;
  std::fclose(f_);
  std::remove(tmp_.c_str());
}

void atomic_file_writer::write(const void* data, size_t n) {
  if (!f_) fail("{}: write after commit", path_.string());
  if (n > 0 && std::fwrite(data, 1, n, f_) != n) {
    const int err = errno;
    fail("{}: write failed: {}", path_.string(), std::strerror(err));
  }
}

void atomic_file_writer::commit() {
  if (!f_) fail("{}: committed twice", path_.string());
  const bool ok = std::fflush(f_) == 0 && ::fsync(::fileno(f_)) == 0;
  int err = errno;
  const bool closed = std::fclose(f_) == 0;
  f_ = nullptr;
  if (!ok || !closed || std::rename(tmp_.c_str(), path_.c_str()) != 0) {
    if (ok) err = errno;
    std::remove(tmp_.c_str());
    fail("{}: write failed: {}", path_.string(), std::strerror(err));
  }
  record_written(path_);
}

void write_file_atomic(const fs::path& path, std::string_view bytes) {
  atomic_file_writer w(path);
  w.write(bytes.data(), bytes.size());
  w.commit();
}

namespace {
// Opens `path` for reading without blocking (a FIFO would block open() and read()) and checks
// that it is a regular file. Returns the descriptor and its size.
int open_regular(const fs::path& path, std::string_view what, off_t& size) {
  const std::string label = what.empty() ? path.string() : fmt::format("{} {}", what, path.string());
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) fail("{}: cannot read: {}", label, std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    fail("{}: cannot read: {}", label, std::strerror(err));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    fail("{}: {}, expected a regular file", label,
         S_ISDIR(st.st_mode)    ? "is a folder"
         : S_ISFIFO(st.st_mode) ? "is a FIFO (named pipe)"
                                : "is not a regular file");
  }
  size = st.st_size;
  return fd;
}
}  // namespace

void require_regular_file(const fs::path& path, std::string_view what) {
  off_t size = 0;
  ::close(open_regular(path, what, size));
}

std::string read_file(const fs::path& path, uint64_t max_bytes) {
  off_t size = 0;
  const int fd = open_regular(path, "", size);
  auto too_big = [&](uint64_t bytes) {
    ::close(fd);
    fail("{}: {} bytes, more than the {} MiB attnum reads from such a file", path.string(), bytes, max_bytes >> 20);
  };
  if (static_cast<uint64_t>(size) > max_bytes) too_big(static_cast<uint64_t>(size));
  std::string out;
  try {
    check_alloc(static_cast<uint64_t>(size), path.string());
    out.reserve(static_cast<size_t>(size));
  } catch (...) {
    ::close(fd);
    throw;
  }
  char buf[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      ::close(fd);
      fail("{}: read failed: {}", path.string(), std::strerror(err));
    }
    out.append(buf, static_cast<size_t>(n));
    if (out.size() > max_bytes) too_big(out.size());
  }
  ::close(fd);
  return out;
}

std::string clip(std::string_view s, size_t max) {
  if (s.size() <= max) return std::string(s);
  size_t n = max;
  while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;  // whole UTF-8 characters
  return fmt::format("{}... ({} bytes)", s.substr(0, n), s.size());
}

nlohmann::json parse_json_text(std::string_view text, std::string_view label, int max_depth) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth)
        fail("{}: JSON nested deeper than {} levels (at byte {}): not a file attnum writes", label, max_depth, i);
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  try {
    return nlohmann::json::parse(text.begin(), text.end());
  } catch (const nlohmann::json::exception& e) {
    fail("{}: not valid JSON: {}", label, clip(e.what()));
  }
}

nlohmann::json read_json(const fs::path& path) {
  return parse_json_text(read_file(path, kMaxJsonBytes), path.string());
}

fs::path path_inside(const fs::path& dir, const std::string& name, std::string_view field) {
  const fs::path p(name);
  if (name.empty() || p.is_absolute() || name.find('\0') != std::string::npos)
    fail("{}: '{}' must be a file name relative to the folder {}", field, clip(name), dir.string());
  for (const auto& part : p)
    if (part == "..") fail("{}: '{}' leaves the folder {} ('..' is not allowed)", field, clip(name), dir.string());
  return dir / p;
}

uint64_t max_alloc_bytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGE_SIZE);
  uint64_t limit = pages > 0 && page > 0 ? uint64_t(pages) * uint64_t(page) : (uint64_t{64} << 30);
  if (const char* env = std::getenv("ATTNUM_MAX_ALLOC_GIB")) {
    char* end = nullptr;
    const double g = std::strtod(env, &end);
    if (end != env && *end == 0 && g > 0 && g * double(uint64_t{1} << 30) < double(limit))
      limit = static_cast<uint64_t>(g * double(uint64_t{1} << 30));
  }
  return limit;
}

uint64_t checked_mul(uint64_t a, uint64_t b) {
  uint64_t r;
  return __builtin_mul_overflow(a, b, &r) ? UINT64_MAX : r;
}

void check_alloc(uint64_t bytes, std::string_view what) {
  const uint64_t limit = max_alloc_bytes();
  if (bytes <= limit) return;
  const double gib = double(uint64_t{1} << 30);
  if (bytes == UINT64_MAX) fail("{} needs more than 2^64 bytes (the sizes overflow)", what);
  // One decimal from 10 GiB on, three significant digits below (small limits in tests).
  auto size = [&](uint64_t b) {
    const double g = double(b) / gib;
    return g >= 10 ? fmt::format("{:.1f}", g) : fmt::format("{:.3g}", g);
  };
  fail("{} needs {} GiB, more than the limit of {} GiB (this machine's memory, or ATTNUM_MAX_ALLOC_GIB)", what,
       size(bytes), size(limit));
}

namespace {
// The result files of a folder and of its checkpoints/ subfolder ("checkpoints/NAME").
nlohmann::json file_hashes(const fs::path& dir) {
  nlohmann::json files = nlohmann::json::object();
  auto add = [&](const fs::path& d, const std::string& prefix) {
    std::error_code ec;
    for (auto it = fs::directory_iterator(d, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
      const std::string name = it->path().filename().string();
      std::error_code ec2;
      if (!it->is_regular_file(ec2) || is_bookkeeping_file(name)) continue;
      const std::string bytes = read_file(it->path());
      files[prefix + name] = {{"bytes", bytes.size()}, {"fnv1a", core::fnv1a_hex(bytes.data(), bytes.size())}};
    }
  };
  add(dir, "");
  if (fs::is_directory(dir / "checkpoints")) add(dir / "checkpoints", "checkpoints/");
  return files;
}
}  // namespace

void write_complete_marker(const fs::path& dir, const std::string& command) {
  const nlohmann::json j = {{"complete", true},
                            {"command", command},
                            {"tool_version", std::string(tool_version())},
                            {"files", file_hashes(dir)}};
  write_file_atomic(dir / kCompleteMarker, j.dump(2) + "\n");
}

void require_complete(const fs::path& dir, std::string_view what) {
  const fs::path m = dir / kCompleteMarker;
  if (!fs::exists(m))
    fail(
        "{}: {} has no {}: the run that wrote it did not finish (rerun the same command to "
        "resume it)",
        what, dir.string(), kCompleteMarker);
  const nlohmann::json j = read_json(m);
  if (!j.is_object() || !j.contains("files") || !j["files"].is_object())
    fail("{}: {}: missing object files", what, m.string());
  const nlohmann::json have = file_hashes(dir);
  for (auto it = j["files"].begin(); it != j["files"].end(); ++it) {
    if (have.contains(it.key()) && have[it.key()] == it.value()) continue;
    // a FIFO, device or folder in place of a listed file (file_hashes reads regular files only)
    const fs::path f = path_inside(dir, it.key(), m.string());
    std::error_code ec;
    if (fs::exists(fs::symlink_status(f, ec)) && !fs::is_regular_file(f, ec)) require_regular_file(f, what);
    fail("{}: {}: file {} changed or is missing since the run finished", what, dir.string(), clip(it.key()));
  }
}

bool is_bookkeeping_file(const std::string& name) {
  return name == kCompleteMarker || name == kLockFile || name.find(".attnum-tmp-") != std::string::npos;
}

namespace {
bool is_token(const std::string& s) {
  return s.size() == 16 && s.find_first_not_of("0123456789abcdef") == std::string::npos;
}

// Reads at most 64 KiB of an open lock file: the recorded run tokens, one a line.
std::vector<std::string> read_tokens(int fd) {
  std::string text(1 << 16, '\0');
  const ssize_t n = ::pread(fd, text.data(), text.size(), 0);
  text.resize(n > 0 ? static_cast<size_t>(n) : 0);
  std::vector<std::string> out;
  size_t at = 0;
  while (at < text.size()) {
    size_t end = text.find('\n', at);
    if (end == std::string::npos) end = text.size();
    const std::string t = text.substr(at, end - at);
    if (is_token(t)) out.push_back(t);
    at = end + 1;
  }
  return out;
}

// The lock files this process holds (canonical folder -> descriptor), released at exit.
std::mutex g_lock_mu;
std::map<std::string, int>& held_locks() {
  static std::map<std::string, int> m;
  return m;
}
}  // namespace

void begin_output_dir(const fs::path& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    fs::create_directories(dir, ec);
    if (ec) fail("{}: cannot create the output folder: {}", dir.string(), ec.message());
  }
  const std::string key = fs::weakly_canonical(dir, ec).string();
  std::lock_guard<std::mutex> l(g_lock_mu);
  if (held_locks().count(key)) return;
  const fs::path lock = dir / kLockFile;
  bool created = true;
  int fd = ::open(lock.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0 && errno == EEXIST) {
    created = false;
    fd = ::open(lock.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  }
  if (fd < 0) fail("{}: cannot open the folder's lock file {}: {}", dir.string(), lock.string(), std::strerror(errno));
  if (created) record_written(lock);
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    fail("{}: {} is not a regular file (attnum's lock file): remove it", dir.string(), lock.string());
  }
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    ::close(fd);
    if (err == EWOULDBLOCK)
      fail(
          "{}: another attnum run is writing into this folder (it holds {}): wait for it to "
          "finish or use another --out",
          dir.string(), lock.string());
    fail("{}: cannot lock {}: {}", dir.string(), lock.string(), std::strerror(err));
  }
  // The runs recorded here hold no lock now: their temp files are stale.
  std::vector<std::string> stale;
  for (const auto& t : read_tokens(fd))
    if (t != run_token()) stale.push_back(".attnum-tmp-" + t);
  if (!stale.empty())
    for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator();
         it.increment(ec)) {
      const std::string name = it->path().filename().string();
      std::error_code ec2;
      if (!it->is_regular_file(ec2) || it->is_symlink(ec2)) continue;
      for (const auto& suffix : stale)
        if (name.size() > suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0) {
          fs::remove(it->path(), ec2);
          break;
        }
    }
  const std::string rec = run_token() + "\n";
  if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, rec.data(), rec.size(), 0) != static_cast<ssize_t>(rec.size()) ||
      ::fsync(fd) != 0) {
    const int err = errno;
    ::close(fd);
    fail("{}: cannot write the lock file {}: {}", dir.string(), lock.string(), std::strerror(err));
  }
  held_locks()[key] = fd;
}

void require_out_outside_inputs(const fs::path& out, const std::vector<fs::path>& inputs, std::string_view flag) {
  if (out.empty()) return;
  std::error_code ec;
  const fs::path o = fs::weakly_canonical(out, ec);
  if (ec) return;
  for (const auto& in : inputs) {
    if (in.empty()) continue;
    const fs::path i = fs::weakly_canonical(in, ec);
    if (ec) continue;
    if (o == i)
      fail("{} {}: is the input {}: attnum never writes over what it reads; choose another path", flag, out.string(),
           in.string());
    const fs::path rel = o.lexically_relative(i);
    if (!rel.empty() && *rel.begin() != ".." && fs::is_directory(i, ec))
      fail(
          "{} {}: is inside the input folder {}: attnum never writes into what it reads; choose "
          "another path",
          flag, out.string(), in.string());
  }
}

fs::path private_temp_dir(std::string_view name) {
  std::error_code ec;
  const fs::path tmp = fs::temp_directory_path(ec);
  if (ec) fail("no temporary folder for scratch files: {}", ec.message());
  const std::string prefix = fmt::format("attnum-{}-", name);
  std::vector<fs::path> stale;
  for (auto it = fs::directory_iterator(tmp, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
    const std::string f = it->path().filename().string();
    std::error_code ec2;
    if (f.rfind(prefix, 0) != 0 || !is_token(f.substr(prefix.size())) || it->is_symlink(ec2) || !it->is_directory(ec2))
      continue;
    // Ours only when its lock file records the token its name carries, and dead when unlocked.
    const fs::path lock = it->path() / kLockFile;
    const int fd = ::open(lock.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0) continue;
    struct stat st {};
    const auto tokens = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) ? read_tokens(fd) : std::vector<std::string>{};
    if (std::find(tokens.begin(), tokens.end(), f.substr(prefix.size())) != tokens.end() &&
        ::flock(fd, LOCK_EX | LOCK_NB) == 0)
      stale.push_back(it->path());
    ::close(fd);
  }
  for (const auto& p : stale) fs::remove_all(p, ec);
  return tmp / (prefix + run_token());
}

output_guard::output_guard(fs::path path) : path_(std::move(path)) {
  std::error_code ec;
  if (path_.empty()) {
    committed_ = true;  // nothing to guard
    return;
  }
  path_ = norm(path_);
  existed_ = fs::exists(fs::symlink_status(path_, ec));
  if (existed_ && fs::is_directory(path_, ec))
    for (auto it = fs::recursive_directory_iterator(path_, ec); !ec && it != fs::recursive_directory_iterator();
         it.increment(ec))
      before_.insert(it->path().lexically_relative(path_).string());
}

namespace {
// Releases this process's lock on `dir` (if it holds one), removing the lock file when asked.
void release_output_dir(const fs::path& dir, bool remove_file) {
  std::error_code ec;
  const std::string key = fs::weakly_canonical(dir, ec).string();
  std::lock_guard<std::mutex> l(g_lock_mu);
  const auto it = held_locks().find(key);
  if (it == held_locks().end()) return;
  if (remove_file) fs::remove(dir / kLockFile, ec);  // unlinked while held: a later run makes a new one
  ::close(it->second);
  held_locks().erase(it);
}
}  // namespace

void output_guard::commit() {
  if (committed_) return;
  committed_ = true;
  release_output_dir(path_, true);
}

output_guard::~output_guard() {
  if (committed_) return;
  std::error_code ec;
  const std::string root = path_.string();
  std::vector<std::string> mine;
  {
    std::lock_guard<std::mutex> l(g_written_mu);
    for (const auto& p : written_paths())
      if (p == root ? !existed_ : p.rfind(root + "/", 0) == 0 && !before_.count(p.substr(root.size() + 1)))
        mine.push_back(p);
  }
  for (const auto& p : mine) fs::remove(p, ec);
  // Folders that did not exist and are empty now (deepest first); a folder holding another
  // process's file stays.
  if (fs::is_directory(fs::symlink_status(path_, ec))) {
    std::vector<fs::path> dirs;
    for (auto it = fs::recursive_directory_iterator(path_, ec); !ec && it != fs::recursive_directory_iterator();
         it.increment(ec)) {
      std::error_code ec2;
      if (it->is_directory(ec2) && !it->is_symlink(ec2) &&
          !before_.count(it->path().lexically_relative(path_).string()))
        dirs.push_back(it->path());
    }
    std::sort(dirs.begin(), dirs.end(),
              [](const fs::path& a, const fs::path& b) { return a.string().size() > b.string().size(); });
    for (const auto& d : dirs) fs::remove(d, ec);  // only removes an empty folder
    if (!existed_) fs::remove(path_, ec);
  }
  release_output_dir(path_, false);  // its lock file went above if this run created it
}

}  // namespace attnum
