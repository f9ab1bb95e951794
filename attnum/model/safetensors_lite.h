#pragma once
// A small safetensors reader/writer private to model/ (the format: 8-byte little-endian header
// length N, N bytes of JSON {name: {dtype, shape, data_offsets}, "__metadata__": {str: str}},
// then the data; https://github.com/huggingface/safetensors). Readers memory-map and validate
// every entry against the file length before any tensor is touched.
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "attnum/model/mapped_file.h"

namespace attnum::model {

/// One tensor in a mapped file.
struct st_tensor {
  std::string name, dtype;     ///< dtype: "F32", "F16", "BF16", ...
  std::vector<int64_t> shape;
  const unsigned char* data = nullptr;
  size_t nbytes = 0;
  size_t numel() const;
};

/// A validated, memory-mapped safetensors file.
class st_reader {
 public:
  /// Maps and validates `path`; throws attnum::error naming the file and the field.
  explicit st_reader(const std::string& path);
  /// Returns the tensor or nullptr.
  const st_tensor* find(const std::string& name) const;
  const std::map<std::string, st_tensor>& tensors() const { return tensors_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  const std::string& path() const { return file_->path(); }
  /// Returns the tensor widened to fp32 (F32, F16, BF16); throws for other dtypes.
  std::vector<float> to_float(const st_tensor& t) const;

 private:
  std::unique_ptr<mapped_file> file_;
  std::map<std::string, st_tensor> tensors_;
  std::map<std::string, std::string> metadata_;
};

/// A tensor to write: fp32 values stored as `dtype` ("F32" or "BF16" (RNE)).
struct st_out {
  std::string name, dtype;
  std::vector<int64_t> shape;
  const float* data = nullptr;
};

/// Writes a safetensors file atomically (temp file + rename).
void st_write(const std::string& path, const std::vector<st_out>& tensors,
              const std::map<std::string, std::string>& metadata);

/// Returns the float value of an IEEE binary16 code.
float half_to_float(uint16_t h);

}  // namespace attnum::model
