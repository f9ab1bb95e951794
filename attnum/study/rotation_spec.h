#pragma once
// The rotation a user names: "random-hadamard:SEED", "hadamard", FILE.npy holding a [d, d]
// float32/float64 orthogonal matrix, or FILE.safetensors:TENSOR naming one such tensor. One
// parser for the CLI's --rotation and Python's rotation=.
#include <string>

#include "attnum/core/error.h"
#include "attnum/io/npy.h"
#include "attnum/io/safetensors.h"
#include "attnum/transforms/hadamard.h"
#include "attnum/core/file.h"

namespace attnum::study {

/// Returns the rotation of `spec` (validated here; the head dim is checked when it is used).
/// Throws attnum::error naming the spec or the file and what is wrong.
inline transforms::rotation parse_rotation(const std::string& spec) {
  if (auto r = transforms::rotation::parse_builtin(spec)) return *r;
  const auto [file, tensor] = io::split_tensor_path(spec);
  if (!tensor.empty()) {
    const io::safetensors_file f(file);
    const io::tensor_view& t = f.at(tensor);
    return transforms::rotation::from_matrix(t.to_double(), t.shape, spec);
  }
  if (spec.size() < 4 || spec.compare(spec.size() - 4, 4, ".npy") != 0)
    fail("--rotation '{}': expected random-hadamard:SEED, hadamard, a FILE.npy or FILE.safetensors:TENSOR", clip(spec));
  std::vector<int64_t> shape;
  const std::vector<double> r = io::read_npy_f64(spec, shape);
  return transforms::rotation::from_matrix(r, shape, spec);
}

}  // namespace attnum::study
