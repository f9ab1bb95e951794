#include "attnum/core/file.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "attnum/core/error.h"

namespace attnum {

void write_file_atomic(const std::filesystem::path& path, std::string_view bytes) {
  std::error_code ec;
  if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path(), ec);
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

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("{}: cannot read: {}", path.string(), std::strerror(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) fail("{}: read failed", path.string());
  return ss.str();
}

}  // namespace attnum
