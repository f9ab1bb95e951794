#pragma once
// A read-only memory-mapped file (RAII). Tensor files are mapped, never copied: a 1 GB checkpoint
// costs address space, not memory.
#include <cstddef>
#include <cstdint>
#include <string>

namespace attnum::io {

class mapped_file {
 public:
  /// Maps `path` read-only; throws attnum::error naming the file if it cannot be opened.
  explicit mapped_file(const std::string& path);
  ~mapped_file();
  mapped_file(mapped_file&& other) noexcept;
  mapped_file& operator=(mapped_file&& other) noexcept;
  mapped_file(const mapped_file&) = delete;
  mapped_file& operator=(const mapped_file&) = delete;

  const uint8_t* data() const { return data_; }  ///< nullptr for an empty file
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  void release() noexcept;
  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace attnum::io
