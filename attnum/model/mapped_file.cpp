#include "attnum/model/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "attnum/core/error.h"

namespace attnum::model {

mapped_file::mapped_file(const std::string& path) : path_(path) {
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) fail("{}: cannot open: {}", path, std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    fail("{}: not a regular file", path);
  }
  size_ = static_cast<size_t>(st.st_size);
  if (size_ > 0) {
    void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      ::close(fd);
      fail("{}: mmap failed: {}", path, std::strerror(errno));
    }
    data_ = static_cast<const unsigned char*>(p);
  }
  ::close(fd);
}

mapped_file::~mapped_file() {
  if (data_) ::munmap(const_cast<unsigned char*>(data_), size_);
}

}  // namespace attnum::model
