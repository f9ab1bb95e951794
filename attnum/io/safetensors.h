#pragma once
// safetensors files (https://github.com/huggingface/safetensors): 8-byte little-endian header
// length N, N bytes of JSON {name: {"dtype", "shape", "data_offsets": [begin, end]},
// "__metadata__": {str: str}}, then the data buffer; offsets are relative to the buffer.
//
// Reading memory-maps the file and validates every entry before any tensor is used: dtype one of
// F32 F16 BF16 F64 I32 I64 U8 I8; shape non-negative; end - begin == product(shape) * dtype size;
// offsets inside the file; tensors contiguous and non-overlapping, covering the buffer exactly.
// Errors name the file, the tensor and what was expected.
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "attnum/core/file.h"
#include "attnum/io/mapped_file.h"

namespace attnum::io {

enum class st_dtype : uint8_t { F32, F16, BF16, F64, I32, I64, U8, I8 };

std::string_view dtype_name(st_dtype d);  ///< "F32", ...
size_t dtype_size(st_dtype d);            ///< bytes per element

/// A tensor inside a mapped file (valid while its safetensors_file lives).
struct tensor_view {
  std::string name;
  st_dtype dtype = st_dtype::F32;
  std::vector<int64_t> shape;
  const uint8_t* data = nullptr;  ///< little-endian raw bytes (may be unaligned)
  size_t nbytes = 0;

  int64_t numel() const;
  /// Converts to float32: F32/F16/BF16/U8/I8 exactly, F64/I32/I64 rounded to nearest.
  std::vector<float> to_float() const;
  /// Same into `out` (numel() floats).
  void to_float(float* out) const;
  /// Converts to float64 (exact for every dtype but I64 beyond 2^53).
  std::vector<double> to_double() const;
};

/// Converts elements [begin, begin + count) of an F32, F16 or BF16 array at `data` (little-endian,
/// may be unaligned) to float32, exactly; throws attnum::error for any other dtype.
void widen_to_float(st_dtype dtype, const uint8_t* data, size_t begin, size_t count, float* out);

/// A validated, memory-mapped safetensors file.
class safetensors_file {
 public:
  /// Maps and validates `path`; throws attnum::error naming the file, tensor and field.
  explicit safetensors_file(const std::string& path);
  safetensors_file(safetensors_file&&) noexcept = default;
  safetensors_file& operator=(safetensors_file&&) noexcept = default;

  const std::string& path() const { return file_.path(); }
  /// The whole file as opened and validated (hash these bytes rather than reopening the path).
  const mapped_file& file() const { return file_; }
  /// All tensors, by name.
  const std::map<std::string, tensor_view, std::less<>>& tensors() const { return tensors_; }
  /// Returns the tensor or nullptr.
  const tensor_view* find(std::string_view name) const;
  /// Returns the tensor; throws attnum::error naming the file and the tensor if absent.
  const tensor_view& at(std::string_view name) const;
  /// The "__metadata__" string map (empty if absent).
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

 private:
  mapped_file file_;
  std::map<std::string, tensor_view, std::less<>> tensors_;
  std::map<std::string, std::string> metadata_;
};

/// Splits "FILE.safetensors:TENSOR" (one tensor of a file of several, e.g. a capture's
/// "layers.1.q") into {"FILE.safetensors", "TENSOR"}; any other path comes back as {path, ""}.
/// Throws attnum::error for "FILE.safetensors:" with no tensor name.
std::pair<std::string, std::string> split_tensor_path(const std::string& path);

/// A float tensor to write, stored as `dtype` (F32; BF16 and F16 with RNE; F64 exact).
struct tensor_out {
  std::string name;
  std::vector<int64_t> shape;
  const float* data = nullptr;  ///< product(shape) values, C order (not owned)
  st_dtype dtype = st_dtype::F32;
};

/// Writes a safetensors file atomically (temp file + rename). Tensors are laid out in the order
/// given; names must be unique and non-empty. Throws attnum::error naming the file and tensor.
/// Holds one converted tensor at a time (safetensors_writer).
void write_safetensors(const std::string& path, const std::vector<tensor_out>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

/// The name, dtype and shape of a tensor a safetensors_writer writes.
struct tensor_layout {
  std::string name;
  st_dtype dtype = st_dtype::F32;
  std::vector<int64_t> shape;
};

/// Writes a safetensors file atomically a tensor at a time, for files larger than memory: the
/// header (every tensor's layout, the data buffer aligned to 8 bytes) is written first, then each
/// tensor's raw little-endian bytes in layout order. Nothing appears at the path before commit();
/// a writer destroyed uncommitted removes its temp file. Throws attnum::error naming the file and
/// the tensor.
class safetensors_writer {
 public:
  safetensors_writer(const std::string& path, std::vector<tensor_layout> layout,
                     const std::map<std::string, std::string>& metadata = {});
  /// Appends the next tensor's bytes (n must be its size: product(shape) * dtype size).
  void write_next(const void* bytes, size_t n);
  /// Finishes the file; throws unless every tensor was written.
  void commit();

 private:
  std::string path_;
  std::vector<tensor_layout> layout_;
  size_t next_ = 0;
  std::unique_ptr<atomic_file_writer> out_;
};

}  // namespace attnum::io
