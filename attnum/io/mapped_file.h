#pragma once
// A read-only memory-mapped file (RAII). Tensor files are mapped, never copied: a 1 GB checkpoint
// costs address space (and page cache) rather than a copy. Where the file system cannot map a
// file (mmap fails), or ATTNUM_NO_MMAP=1 is set, the file is read into memory instead, with a
// notice on stderr.
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
  /// False when the file was read into memory instead of mapped.
  bool mapped() const { return mapped_; }

 private:
  void release() noexcept;
  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  bool mapped_ = true;
};

/// Installs a SIGBUS handler: a mapped file truncated by another process while attnum reads it
/// makes the next access fault; the handler prints that on stderr (what happened, that result
/// files are written whole and a rerun resumes) and exits with status 2 instead of a core dump.
/// Sizes are validated against each file when it is opened, so only a change underneath gets here.
void report_mapped_file_faults();

}  // namespace attnum::io
