// mmap-backed read-only files.
#include "attnum/io/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <csignal>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string_view>
#include <utility>

#include "attnum/core/error.h"
#include "attnum/core/file.h"

namespace attnum::io {

mapped_file::mapped_file(const std::string& path) : path_(path) {
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer forever.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) fail("{}: cannot open: {}", path, std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    const bool dir = S_ISDIR(st.st_mode), fifo = S_ISFIFO(st.st_mode);
    ::close(fd);
    fail("{}: {}, expected a regular file", path,
         dir    ? "is a folder"
         : fifo ? "is a FIFO (named pipe)"
                : "is not a regular file");
  }
  size_ = static_cast<size_t>(st.st_size);
  if (size_ > 0) {
    const char* no_mmap = std::getenv("ATTNUM_NO_MMAP");
    const bool forced = no_mmap && std::string_view(no_mmap) == "1";
    void* p = forced ? MAP_FAILED : ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p != MAP_FAILED) {
      data_ = static_cast<const uint8_t*>(p);
    } else {
      // Read instead (a file system without mmap support, or the override).
      const std::string why = forced ? "ATTNUM_NO_MMAP=1" : std::strerror(errno);
      std::fprintf(stderr, "attnum: %s: not memory-mapped (%s): reading its %zu bytes into memory\n", path.c_str(),
                   why.c_str(), size_);
      check_alloc(size_, path + ": reading the file");
      auto* buf = new (std::nothrow) uint8_t[size_];
      if (!buf) {
        ::close(fd);
        fail("{}: cannot allocate {} bytes to read it", path, size_);
      }
      size_t got = 0;
      while (got < size_) {
        const ssize_t r = ::pread(fd, buf + got, size_ - got, off_t(got));
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
          const int err = errno;
          delete[] buf;
          ::close(fd);
          fail("{}: read {} of {} bytes: {}", path, got, size_, r == 0 ? "the file shrank" : std::strerror(err));
        }
        got += size_t(r);
      }
      data_ = buf;
      mapped_ = false;
    }
  }
  ::close(fd);  // the mapping stays valid
}

void mapped_file::release() noexcept {
  if (data_ && mapped_) ::munmap(const_cast<uint8_t*>(data_), size_);
  if (data_ && !mapped_) delete[] data_;
  data_ = nullptr;
  size_ = 0;
}

namespace {
void on_sigbus(int) {
  static const char msg[] =
      "attnum: a memory-mapped input file (a checkpoint, capture or tensor file) was truncated or "
      "replaced while this run read it (SIGBUS). Result files are written whole: restore the file "
      "and rerun the same command to resume.\n";
  ssize_t r = ::write(2, msg, sizeof msg - 1);
  (void)r;
  ::_exit(2);
}
}  // namespace

void report_mapped_file_faults() {
  struct sigaction sa {};
  sa.sa_handler = on_sigbus;
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGBUS, &sa, nullptr);
}

mapped_file::~mapped_file() { release(); }

mapped_file::mapped_file(mapped_file&& o) noexcept
    : path_(std::move(o.path_)),
      data_(std::exchange(o.data_, nullptr)),
      size_(std::exchange(o.size_, 0)),
      mapped_(o.mapped_) {}

mapped_file& mapped_file::operator=(mapped_file&& o) noexcept {
  if (this != &o) {
    release();
    path_ = std::move(o.path_);
    data_ = std::exchange(o.data_, nullptr);
    size_ = std::exchange(o.size_, 0);
    mapped_ = o.mapped_;
  }
  return *this;
}

}  // namespace attnum::io
