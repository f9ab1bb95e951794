#pragma once
// NumPy .npy files (format version 1.0/2.0/3.0: magic, header dict, raw data;
// https://numpy.org/doc/stable/reference/generated/numpy.lib.format.html). Supported: little-endian
// float32 ('<f4'), float64 ('<f8'), float16 ('<f2'), C order, any rank >= 1 (2-D and 3-D are the
// ones in use). bfloat16 has no npy dtype: use safetensors.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace attnum::io {

enum class npy_dtype : uint8_t { f32, f64, f16 };

/// Returns "<f4", "<f8" or "<f2".
std::string_view npy_descr(npy_dtype d);

/// An array read from .npy, converted to float32 (exactly, except f64 which is rounded to nearest).
struct npy_array {
  std::vector<int64_t> shape;
  std::vector<float> data;  ///< C order
  npy_dtype source_dtype = npy_dtype::f32;
  int64_t numel() const;
};

/// Reads `path`; throws attnum::error naming the file and the field (magic, header, descr,
/// fortran_order, shape, truncated data).
npy_array read_npy(const std::string& path);
/// Reads `path` as float64 (f32/f16 widened exactly); `shape` receives the shape.
std::vector<double> read_npy_f64(const std::string& path, std::vector<int64_t>& shape);

/// Writes `data` (C order, product(shape) values) as `dtype` (f16: RNE, overflow to Inf),
/// atomically.
void write_npy(const std::string& path, const float* data, const std::vector<int64_t>& shape,
               npy_dtype dtype = npy_dtype::f32);
/// Writes float64 values as '<f8', atomically.
void write_npy(const std::string& path, const double* data, const std::vector<int64_t>& shape);

}  // namespace attnum::io
