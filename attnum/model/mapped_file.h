#pragma once
// A read-only memory-mapped file (checkpoints are read in place, never copied whole).
#include <cstddef>
#include <cstdint>
#include <string>

namespace attnum::model {

/// Maps a whole file read-only; throws attnum::error naming the path when it cannot.
class mapped_file {
 public:
  explicit mapped_file(const std::string& path);
  ~mapped_file();
  mapped_file(const mapped_file&) = delete;
  mapped_file& operator=(const mapped_file&) = delete;
  const unsigned char* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  const unsigned char* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace attnum::model
