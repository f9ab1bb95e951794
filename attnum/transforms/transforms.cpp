// Rotations (hadamard.h) and key centering (centering.h), and the rounding of their outputs to
// the transform dtype.
#include <charconv>
#include <cmath>
#include <vector>

#include "attnum/core/error.h"
#include "attnum/core/random.h"
#include "attnum/transforms/centering.h"
#include "attnum/transforms/hadamard.h"
#include "attnum/core/file.h"

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

float round_to(formats::format f, double x) {
  if (f == formats::format::fp32) return static_cast<float>(x);
  return static_cast<float>(formats::decode(f, formats::encode(f, x, formats::rounding::nearest_even, false)));
}

void round_all(float* x, size_t n, formats::format f) {
  // The float fast paths equal round_to (float -> bf16/fp16 is one rounding either way).
  if (f == formats::format::bf16)
    for (size_t i = 0; i < n; ++i) x[i] = formats::quantize_bf16(x[i]);
  else if (f == formats::format::fp16)
    for (size_t i = 0; i < n; ++i) x[i] = formats::quantize_fp16(x[i]);
  else
    check_transform_dtype(f, "round_all");
}

void check_transform_dtype(formats::format f, std::string_view what) {
  if (f != formats::format::fp32 && f != formats::format::bf16 && f != formats::format::fp16)
    fail("{}: transform dtype must be fp32, bf16 or fp16, got {}", what, formats::info(f).name);
}

namespace {

bool is_pow2(int d) { return d > 0 && (d & (d - 1)) == 0; }

// Sylvester H_d[i][j] = (-1)^popcount(i & j).
double sylvester(int i, int j) { return (__builtin_popcount(static_cast<unsigned>(i & j)) & 1) ? -1.0 : 1.0; }

}  // namespace

rotation rotation::random_hadamard(uint64_t seed) {
  rotation r;
  r.kind_ = kind::random_hadamard;
  r.seed_ = seed;
  r.name_ = "random-hadamard:" + std::to_string(seed);
  return r;
}

rotation rotation::hadamard() {
  rotation r;
  r.kind_ = kind::hadamard;
  r.name_ = "hadamard";
  return r;
}

std::optional<rotation> rotation::parse_builtin(std::string_view spec) {
  if (spec == "hadamard") return hadamard();
  constexpr std::string_view prefix = "random-hadamard:";
  if (spec.substr(0, prefix.size()) != prefix) return std::nullopt;
  std::string_view t = spec.substr(prefix.size());
  int base = 10;
  if (t.size() > 2 && t[0] == '0' && (t[1] == 'x' || t[1] == 'X')) t.remove_prefix(2), base = 16;
  uint64_t seed = 0;
  const auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), seed, base);
  if (t.empty() || ec != std::errc() || end != t.data() + t.size())
    fail("--rotation '{}': SEED must be an unsigned 64-bit integer (decimal or 0x hex)", clip(spec));
  return random_hadamard(seed);
}

rotation rotation::from_matrix(const std::vector<double>& r, const std::vector<int64_t>& shape, std::string source) {
  if (shape.size() != 2 || shape[0] != shape[1] || shape[0] <= 0)
    fail("{}: a rotation must be a square [d, d] matrix, got shape [{}]", clip(source), [&] {
      std::string s;
      for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
      return s;
    }());
  const int d = static_cast<int>(shape[0]);
  ATTNUM_ASSERT(r.size() == static_cast<size_t>(d) * d, "from_matrix: {} values for [{}, {}]", r.size(), d, d);
  for (size_t i = 0; i < r.size(); ++i)
    if (!std::isfinite(r[i])) fail("{}: rotation entry [{}, {}] is not finite ({})", clip(source), i / d, i % d, r[i]);
  double worst = 0;
  int wi = 0, wj = 0;
  for (int i = 0; i < d; ++i)
    for (int j = 0; j < d; ++j) {
      double s = 0;
      for (int c = 0; c < d; ++c) s += r[static_cast<size_t>(i) * d + c] * r[static_cast<size_t>(j) * d + c];
      const double e = std::fabs(s - (i == j ? 1.0 : 0.0));
      if (e > worst) worst = e, wi = i, wj = j;
    }
  if (!(worst <= 1e-6))
    fail("{}: rotation is not orthogonal: max |R R^T - I| = {:.3e} at [{}, {}] (limit 1e-6)", clip(source), worst, wi,
         wj);
  rotation out;
  out.name_ = std::move(source);
  out.d_ = d;
  // Hadamard family, bit for bit: R[i][j] == s_i * H[i][j] * c with c = |R[0][0]|, s_i = sign R[i][0].
  bool family = is_pow2(d);
  const double c = std::fabs(r[0]);
  std::vector<double> signs(d);
  for (int i = 0; family && i < d; ++i) {
    signs[i] = std::signbit(r[static_cast<size_t>(i) * d]) ? -1.0 : 1.0;
    for (int j = 0; family && j < d; ++j) family = r[static_cast<size_t>(i) * d + j] == signs[i] * sylvester(i, j) * c;
  }
  if (family) {
    out.kind_ = kind::hadamard_signs;
    out.norm_ = c;
    out.m_ = std::make_shared<const std::vector<double>>(std::move(signs));
  } else {
    out.kind_ = kind::dense;
    out.m_ = std::make_shared<const std::vector<double>>(r);
  }
  return out;
}

void rotation::check(int d) const {
  if (d_ != 0) {
    if (d != d_) fail("{}: the rotation is [{}, {}] but the head dim is {}", clip(name_), d_, d_, d);
    return;
  }
  if (!is_pow2(d))
    fail(
        "rotation {}: head dim {} is not a power of two; the Walsh-Hadamard transform needs d = 2^k "
        "(give --rotation FILE.npy with a [{}, {}] orthogonal matrix instead)",
        clip(name_), d, d, d);
}

std::vector<double> rotation::matrix(int d) const {
  check(d);
  if (kind_ == kind::dense) return *m_;
  std::vector<double> r(static_cast<size_t>(d) * d);
  const auto s = signs(d);
  for (int i = 0; i < d; ++i) {
    std::vector<double> e(d, 0.0);
    e[i] = 1;
    row(e.data(), r.data() + static_cast<size_t>(i) * d, d, s);  // row i of R = e_i R
  }
  return r;
}

// The signs of the Hadamard family for head dim d (empty: none, H_d / sqrt(d)).
std::vector<double> rotation::signs(int d) const {
  if (kind_ == kind::random_hadamard) return random_signs(d, seed_);
  if (kind_ == kind::hadamard_signs) return *m_;
  return {};
}

// y = x·R in double; `s` = signs(d). y must not alias x.
void rotation::row(const double* x, double* y, int d, const std::vector<double>& s) const {
  if (kind_ == kind::dense) {
    const std::vector<double>& R = *m_;
    for (int j = 0; j < d; ++j) y[j] = 0;
    for (int i = 0; i < d; ++i)  // every y_j = sum_i x_i R[i][j], ascending i
      for (int j = 0; j < d; ++j) y[j] += x[i] * R[static_cast<size_t>(i) * d + j];
    return;
  }
  for (int c = 0; c < d; ++c) y[c] = s.empty() ? x[c] : x[c] * s[c];
  fwht(y, d);
  const double norm = kind_ == kind::hadamard_signs ? norm_ : 1.0 / std::sqrt(static_cast<double>(d));
  for (int c = 0; c < d; ++c) y[c] *= norm;
}

void rotation::apply(double* x, int64_t rows, int d) const {
  check(d);
  std::vector<double> y(d);
  const auto s = signs(d);
  for (int64_t r = 0; r < rows; ++r) {
    double* xr = x + r * d;
    row(xr, y.data(), d, s);
    std::copy(y.begin(), y.end(), xr);
  }
}

void rotation::apply(float* x, int64_t rows, int d, formats::format out) const {
  check(d);
  check_transform_dtype(out, "rotation");
  std::vector<double> buf(d), y(d);
  const auto s = signs(d);
  for (int64_t r = 0; r < rows; ++r) {
    float* xr = x + r * d;
    for (int c = 0; c < d; ++c) buf[c] = xr[c];
    row(buf.data(), y.data(), d, s);
    for (int c = 0; c < d; ++c) xr[c] = round_to(out, y[c]);
  }
}

void rotate_rows(double* x, int64_t rows, int d, uint64_t seed) { rotation::random_hadamard(seed).apply(x, rows, d); }
void rotate_rows(float* x, int64_t rows, int d, uint64_t seed) { rotation::random_hadamard(seed).apply(x, rows, d); }

namespace {
template <typename T, typename Round>
void center_impl(T* k, int n_tok, int d, bool causal_prefix, Round round) {
  std::vector<double> sum(d, 0.0), mean(d, 0.0);
  if (!causal_prefix) {
    for (int t = 0; t < n_tok; ++t)
      for (int c = 0; c < d; ++c) sum[c] += k[static_cast<int64_t>(t) * d + c];
    for (int c = 0; c < d; ++c) mean[c] = n_tok > 0 ? sum[c] / n_tok : 0.0;
    for (int t = 0; t < n_tok; ++t)
      for (int c = 0; c < d; ++c) {
        T& x = k[static_cast<int64_t>(t) * d + c];
        x = round(x - mean[c]);
      }
    return;
  }
  for (int t = 0; t < n_tok; ++t)
    for (int c = 0; c < d; ++c) {
      T& x = k[static_cast<int64_t>(t) * d + c];
      sum[c] += x;
      x = round(x - sum[c] / (t + 1));
    }
}
}  // namespace

void center_keys(double* k, int n_tok, int d, bool causal_prefix) {
  center_impl(k, n_tok, d, causal_prefix, [](double x) { return x; });
}
void center_keys(float* k, int n_tok, int d, bool causal_prefix, formats::format out) {
  check_transform_dtype(out, "centering");
  center_impl(k, n_tok, d, causal_prefix, [out](double x) { return round_to(out, x); });
}

}  // namespace attnum::transforms
