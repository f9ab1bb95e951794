#include "attnum/core/file.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "attnum/core/error.h"
#include "attnum/core/hash.h"
#include "attnum/core/version.h"

namespace attnum {
namespace fs = std::filesystem;

void write_file_atomic(const fs::path& path, std::string_view bytes) {
  std::error_code ec;
  if (path.has_parent_path() && !fs::is_directory(path.parent_path())) {
    fs::create_directories(path.parent_path(), ec);
    if (ec) fail("{}: cannot create folder {}: {}", path.string(), path.parent_path().string(), ec.message());
  }
  // The pid keeps concurrent writers (ranks, shards) from sharing a temp file.
  const std::string tmp = path.string() + ".tmp." + std::to_string(::getpid());
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) fail("{}: cannot write (temp file {}): {}", path.string(), tmp, std::strerror(errno));
  const bool ok = (bytes.empty() || std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size()) &&
                  std::fflush(f) == 0 && ::fsync(::fileno(f)) == 0;
  const bool closed = std::fclose(f) == 0;
  if (!ok || !closed || std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    std::remove(tmp.c_str());
    fail("{}: write failed: {}", path.string(), std::strerror(err));
  }
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
         S_ISDIR(st.st_mode) ? "is a folder" : S_ISFIFO(st.st_mode) ? "is a FIFO (named pipe)" : "is not a regular file");
  }
  size = st.st_size;
  return fd;
}
}  // namespace

void require_regular_file(const fs::path& path, std::string_view what) {
  off_t size = 0;
  ::close(open_regular(path, what, size));
}

std::string read_file(const fs::path& path) {
  off_t size = 0;
  const int fd = open_regular(path, "", size);
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
  }
  ::close(fd);
  return out;
}

fs::path path_inside(const fs::path& dir, const std::string& name, std::string_view field) {
  const fs::path p(name);
  if (name.empty() || p.is_absolute() || name.find('\0') != std::string::npos)
    fail("{}: '{}' must be a file name relative to the folder {}", field, name, dir.string());
  for (const auto& part : p)
    if (part == "..")
      fail("{}: '{}' leaves the folder {} ('..' is not allowed)", field, name, dir.string());
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
  fail("{} needs {:.1f} GiB, more than the limit of {:.1f} GiB (this machine's memory, or "
       "ATTNUM_MAX_ALLOC_GIB)", what, double(bytes) / gib, double(limit) / gib);
}

namespace {
nlohmann::json file_hashes(const fs::path& dir) {
  nlohmann::json files = nlohmann::json::object();
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (!e.is_regular_file() || name == kCompleteMarker || name.find(".tmp.") != std::string::npos) continue;
    const std::string bytes = read_file(e.path());
    files[name] = {{"bytes", bytes.size()}, {"fnv1a", core::fnv1a_hex(bytes.data(), bytes.size())}};
  }
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
    fail("{}: {} has no {}: the run that wrote it did not finish (rerun the same command to "
         "resume it)", what, dir.string(), kCompleteMarker);
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(read_file(m));
  } catch (const nlohmann::json::exception& e) {
    fail("{}: {}: not valid JSON: {}", what, m.string(), e.what());
  }
  if (!j.is_object() || !j.contains("files") || !j["files"].is_object())
    fail("{}: {}: missing object files", what, m.string());
  const nlohmann::json have = file_hashes(dir);
  for (auto it = j["files"].begin(); it != j["files"].end(); ++it)
    if (!have.contains(it.key()) || have[it.key()] != it.value())
      fail("{}: {}: file {} changed or is missing since the run finished", what, dir.string(), it.key());
}

namespace {
// True when `pid_text` is a whole positive number naming a process that no longer exists (a
// live process, this one included, or text that is not a PID gives false).
bool names_dead_process(const std::string& pid_text) {
  if (pid_text.empty() || pid_text.find_first_not_of("0123456789") != std::string::npos || pid_text.size() > 10)
    return false;
  const long long pid = std::stoll(pid_text);
  return pid > 0 && pid <= 2147483647 && pid != ::getpid() && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH;
}
}  // namespace

fs::path private_temp_dir(std::string_view name) {
  std::error_code ec;
  const fs::path tmp = fs::temp_directory_path(ec);
  if (ec) fail("no temporary folder for scratch files: {}", ec.message());
  const std::string prefix = fmt::format("attnum-{}", name);
  for (auto it = fs::directory_iterator(tmp, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
    const std::string f = it->path().filename().string();
    const size_t dash = f.rfind('-');
    if (dash == std::string::npos || !it->is_directory(ec)) continue;
    if (f.substr(0, dash) == prefix && names_dead_process(f.substr(dash + 1))) {
      std::error_code ec2;
      fs::remove_all(it->path(), ec2);
    }
  }
  return tmp / fmt::format("{}-{}", prefix, static_cast<long>(::getpid()));
}

void begin_output_dir(const fs::path& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    const std::string name = it->path().filename().string();
    const size_t at = name.rfind(".tmp.");
    if (at == std::string::npos || !it->is_regular_file()) continue;
    // A temp file of a live process (a concurrent shard) stays; a dead writer's is stale.
    if (names_dead_process(name.substr(at + 5))) {
      std::error_code ec2;
      fs::remove(it->path(), ec2);
    }
  }
}

output_guard::output_guard(fs::path path) : path_(std::move(path)) {
  std::error_code ec;
  if (path_.empty()) {
    committed_ = true;  // nothing to guard
    return;
  }
  existed_ = fs::exists(fs::symlink_status(path_, ec));
  if (existed_ && fs::is_directory(path_, ec))
    for (auto it = fs::recursive_directory_iterator(path_, ec); !ec && it != fs::recursive_directory_iterator();
         it.increment(ec))
      before_.insert(it->path().lexically_relative(path_).string());
}

output_guard::~output_guard() {
  if (committed_) return;
  std::error_code ec;
  if (!existed_) {
    fs::remove_all(path_, ec);
    return;
  }
  if (!fs::is_directory(path_, ec)) return;
  std::vector<fs::path> created;
  for (auto it = fs::recursive_directory_iterator(path_, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec))
    if (!before_.count(it->path().lexically_relative(path_).string())) {
      created.push_back(it->path());
      it.disable_recursion_pending();  // a new folder goes whole
    }
  for (const auto& p : created) fs::remove_all(p, ec);
}

}  // namespace attnum
