// Randomized Hadamard rotation and key centering (see hadamard.h, centering.h).
#include <cmath>
#include <vector>

#include "attnum/core/error.h"
#include "attnum/core/random.h"
#include "attnum/transforms/centering.h"
#include "attnum/transforms/hadamard.h"

namespace attnum::transforms {

std::vector<double> random_signs(int d, uint64_t seed) {
  std::vector<double> s(d);
  core::splitmix64 r(seed);  // the top bit of each draw
  for (int i = 0; i < d; ++i) s[i] = r.sign();
  return s;
}

void fwht(double* x, int d) {
  for (int h = 1; h < d; h *= 2)
    for (int i = 0; i < d; i += 2 * h)
      for (int j = i; j < i + h; ++j) {
        double a = x[j], b = x[j + h];
        x[j] = a + b;
        x[j + h] = a - b;
      }
}

namespace {
void check_pow2(int d) {
  if (d <= 0 || (d & (d - 1)) != 0)
    fail("rotation: head dim {} is not a power of two; the randomized Walsh-Hadamard transform "
         "needs d = 2^k (no construction for {} is implemented)", d, d);
}
}  // namespace

void rotate_rows(double* x, int64_t rows, int d, uint64_t seed) {
  check_pow2(d);
  const auto s = random_signs(d, seed);
  const double norm = 1.0 / std::sqrt(static_cast<double>(d));
  for (int64_t r = 0; r < rows; ++r) {
    double* row = x + r * d;
    for (int c = 0; c < d; ++c) row[c] *= s[c];
    fwht(row, d);
    for (int c = 0; c < d; ++c) row[c] *= norm;
  }
}

void rotate_rows(float* x, int64_t rows, int d, uint64_t seed) {
  check_pow2(d);
  std::vector<double> buf(d);
  const auto s = random_signs(d, seed);
  const double norm = 1.0 / std::sqrt(static_cast<double>(d));
  for (int64_t r = 0; r < rows; ++r) {
    float* row = x + r * d;
    for (int c = 0; c < d; ++c) buf[c] = row[c] * s[c];
    fwht(buf.data(), d);
    for (int c = 0; c < d; ++c) row[c] = static_cast<float>(buf[c] * norm);
  }
}

namespace {
template <typename T>
void center_impl(T* k, int n_tok, int d, bool causal_prefix) {
  std::vector<double> sum(d, 0.0), mean(d, 0.0);
  if (!causal_prefix) {
    for (int t = 0; t < n_tok; ++t)
      for (int c = 0; c < d; ++c) sum[c] += k[static_cast<int64_t>(t) * d + c];
    for (int c = 0; c < d; ++c) mean[c] = n_tok > 0 ? sum[c] / n_tok : 0.0;
    for (int t = 0; t < n_tok; ++t)
      for (int c = 0; c < d; ++c) k[static_cast<int64_t>(t) * d + c] = static_cast<T>(k[static_cast<int64_t>(t) * d + c] - mean[c]);
    return;
  }
  for (int t = 0; t < n_tok; ++t)
    for (int c = 0; c < d; ++c) {
      T& x = k[static_cast<int64_t>(t) * d + c];
      sum[c] += x;
      x = static_cast<T>(x - sum[c] / (t + 1));
    }
}
}  // namespace

void center_keys(double* k, int n_tok, int d, bool causal_prefix) { center_impl(k, n_tok, d, causal_prefix); }
void center_keys(float* k, int n_tok, int d, bool causal_prefix) { center_impl(k, n_tok, d, causal_prefix); }

}  // namespace attnum::transforms
