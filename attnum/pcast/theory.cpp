// P-cast theory: delta_k, F(Delta, S), Delta_c, the exact expectation, dp(S), the reverse bound.
#include "attnum/pcast/theory.h"

#include <boost/math/distributions/normal.hpp>
#include <boost/math/quadrature/gauss_kronrod.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <numbers>

#include "attnum/core/error.h"
#include "attnum/formats/format.h"
#include "attnum/core/file.h"

namespace attnum::pcast {
namespace {

double normal_cdf(double x) { return 0.5 * std::erfc(-x / std::numbers::sqrt2); }
double normal_pdf(double x) { return std::exp(-0.5 * x * x) / std::sqrt(2.0 * std::numbers::pi); }

// log Phi(x), accurate in both tails (log1p for x > 0, where Phi is close to 1).
double log_normal_cdf(double x) {
  if (x > 0) return std::log1p(-0.5 * std::erfc(x / std::numbers::sqrt2));
  return std::log(0.5 * std::erfc(-x / std::numbers::sqrt2));
}

// Integrates f over [a, b] as a sum of fixed 15-point Gauss-Kronrod rules on pieces of width <=
// 0.5: the integrands here are smooth bumps of width >= ~0.3 (the max of 1e6 normals has sd 0.3),
// so no adaptive search can miss them.
template <typename F>
double integrate(F f, double a, double b) {
  using gk = boost::math::quadrature::gauss_kronrod<double, 15>;
  const int pieces = std::max(1, static_cast<int>(std::ceil((b - a) / 0.5)));
  const double h = (b - a) / pieces;
  double sum = 0;
  for (int i = 0; i < pieces; ++i) {
    const double lo = a + i * h;
    sum += gk::integrate(f, lo, lo + h, 0);
  }
  return sum;
}

// log H(g) for G = max(k sinks ~ Delta + N(0,1), n non-sinks ~ N(0,1)).
double log_max_cdf(double g, double delta, int64_t k, int64_t n) {
  double lh = 0;
  if (k > 0) lh += static_cast<double>(k) * log_normal_cdf(g - delta);
  if (n > 0) lh += static_cast<double>(n) * log_normal_cdf(g);
  return lh;
}

// E[Phi(G - c)] = int (1 - H(g)) phi(g - c) dg (by parts; the complement form keeps tiny
// probabilities accurate). phi(g - c) < 1e-37 beyond |g - c| = 13.
double expected_phi_of_max(double c, double delta, int64_t k, int64_t n) {
  if (k == 0 && n == 0) return 0.0;  // no max at all: nothing can underflow against it
  return integrate([&](double g) { return -std::expm1(log_max_cdf(g, delta, k, n)) * normal_pdf(g - c); }, c - 13.0,
                   c + 13.0);
}

// E[max] = int_0^inf (1 - H) - int_-inf^0 H, for the max of k sinks and n non-sinks.
double expected_max(double delta, int64_t k, int64_t n) {
  const double lo = std::min(0.0, delta) - 14.0, hi = std::max(0.0, delta) + 14.0;
  const double up = integrate([&](double g) { return -std::expm1(log_max_cdf(g, delta, k, n)); }, 0.0, hi);
  const double down = integrate([&](double g) { return std::exp(log_max_cdf(g, delta, k, n)); }, lo, 0.0);
  return up - down;
}

// Shared walk over the blocks in processing order. For each block it calls
// visit(non_sinks_in_block, sinks_seen, non_sinks_seen, is_sink_block).
template <typename V>
void walk_blocks(const row_shape& s, block_order order, V visit) {
  if (s.n_tok < 1 || s.block < 1 || s.k_sink < 0 || s.k_sink > s.n_tok)
    fail(
        "pcast: row shape n_tok {} block {} k_sink {}: expected n_tok >= 1, block >= 1, "
        "0 <= k_sink <= n_tok",
        s.n_tok, s.block, s.k_sink);
  const int nb = (s.n_tok + s.block - 1) / s.block;
  int64_t k_seen = 0, n_seen = 0;
  for (int t = 0; t < nb; ++t) {
    const int b = order == block_order::forward ? t : nb - 1 - t;
    const int lo = b * s.block, hi = std::min(s.n_tok, lo + s.block);
    const int sinks = std::clamp(s.k_sink - lo, 0, hi - lo);
    k_seen += sinks;
    n_seen += hi - lo - sinks;
    visit(hi - lo - sinks, k_seen, n_seen, sinks > 0);
  }
}

double underflow_exact_impl(double delta, double scale, const row_shape& shape, block_order order,
                            bool skip_sink_block) {
  const double c = flush_threshold(scale);
  double sum = 0;
  int64_t count = 0;
  walk_blocks(shape, order, [&](int n_block, int64_t k_seen, int64_t n_seen, bool sink_block) {
    if (n_block == 0 || (skip_sink_block && sink_block)) return;
    // The value itself is one of the n_seen non-sinks; it cannot lie below its own max - c.
    sum += n_block * expected_phi_of_max(c, delta, k_seen, n_seen - 1);
    count += n_block;
  });
  return count ? sum / static_cast<double>(count) : 0.0;
}

// The E4M3 grid [0, 2^-9, ..., 448], read off quantize_e4m3_sat: every E4M3 value is m * 2^e
// with m < 16 and -9 <= e <= 8, so keeping the candidates the cast leaves unchanged gives the grid.
const std::vector<double>& e4m3_grid() {
  static const std::vector<double> grid = [] {
    std::vector<double> g;
    for (int e = -13; e <= 9; ++e)
      for (int m = 0; m < 16; ++m) {
        const float c = std::ldexp(static_cast<float>(m), e);
        if (c <= 448.0f && formats::quantize_e4m3_sat(c) == c) g.push_back(c);
      }
    std::sort(g.begin(), g.end());
    g.erase(std::unique(g.begin(), g.end()), g.end());
    return g;
  }();
  return grid;
}

}  // namespace

const char* order_name(block_order o) { return o == block_order::forward ? "forward" : "reverse"; }

block_order parse_order(const char* text) {
  if (!std::strcmp(text, "forward") || !std::strcmp(text, "fwd")) return block_order::forward;
  if (!std::strcmp(text, "reverse") || !std::strcmp(text, "rev")) return block_order::reverse;
  fail("pcast: order '{}': expected forward or reverse", clip(text));
}

double delta_k(int k) {
  if (k < 1) fail("pcast: k_sink {}: expected >= 1 for delta_k", k);
  return expected_max(0.0, 0, k);
}

double flush_threshold(double scale) {
  if (!(scale > 0) || !std::isfinite(scale)) fail("pcast: scale {}: expected a positive number", scale);
  return kLn2Times10 + std::log(scale);
}

double underflow_closed_form(double delta, double scale, int k_sink) {
  const double dk = k_sink >= 1 ? delta_k(k_sink) : 0.0;
  return normal_cdf(delta + dk - flush_threshold(scale));
}

double delta_c(double scale, int k_sink) { return flush_threshold(scale) - (k_sink >= 1 ? delta_k(k_sink) : 0.0); }

double underflow_exact(double delta, double scale, const row_shape& shape, block_order order) {
  return underflow_exact_impl(delta, scale, shape, order, false);
}

double underflow_exact_outside_sink_block(double delta, double scale, const row_shape& shape, block_order order) {
  return underflow_exact_impl(delta, scale, shape, order, true);
}

double dp(double scale) {
  if (!(scale > 0) || !std::isfinite(scale)) fail("pcast: dp scale {}: expected a positive number", scale);
  const auto& g = e4m3_grid();
  const double top = std::min(scale, 448.0);
  double step = 0;
  for (size_t i = 0; i + 1 < g.size() && g[i] < top; ++i) step = std::max(step, g[i + 1] - g[i]);
  if (scale > 448.0) step = std::max(step, 2.0 * (scale - 448.0));
  return step / scale;
}

reverse_bound_row reverse_bound(int64_t n_tok, double scale) {
  if (n_tok < 1) fail("pcast: reverse bound n_tok {}: expected >= 1", n_tok);
  reverse_bound_row r;
  r.n_tok = n_tok;
  r.scale = scale;
  r.flush = flush_threshold(scale);
  r.max_mean = expected_max(0.0, 0, n_tok);
  r.sqrt_2_ln_n = std::sqrt(2.0 * std::log(static_cast<double>(n_tok)));
  // P(M_N <= x) = Phi(x)^N = 1 - 1e-6  <=>  Phi(-x) = -expm1(log1p(-1e-6) / N).
  const double tail = -std::expm1(std::log1p(-1e-6) / static_cast<double>(n_tok));
  r.max_q999999 = -boost::math::quantile(boost::math::normal(), tail);
  r.p_underflow = expected_phi_of_max(r.flush, 0.0, 0, n_tok);
  r.expected_count = r.p_underflow * static_cast<double>(n_tok);
  r.paper_m = 2.0 * std::log(static_cast<double>(n_tok)) + 1.0;
  return r;
}

std::vector<theory_row> theory_table(const std::vector<double>& deltas, const std::vector<double>& scales,
                                     const row_shape& shape) {
  std::vector<theory_row> rows;
  const double dk = shape.k_sink >= 1 ? delta_k(shape.k_sink) : 0.0;
  for (double d : deltas)
    for (double s : scales) {
      theory_row r;
      r.delta = d;
      r.scale = s;
      r.k_sink = shape.k_sink;
      r.delta_k = dk;
      r.underflow_fraction = normal_cdf(d + dk - flush_threshold(s));
      r.underflow_exact = underflow_exact(d, s, shape, block_order::forward);
      r.delta_c = flush_threshold(s) - dk;
      rows.push_back(r);
    }
  return rows;
}

std::vector<dp_row> dp_table(const std::vector<double>& scales) {
  std::vector<dp_row> rows;
  rows.reserve(scales.size());
  for (double s : scales) rows.push_back({s, dp(s)});
  return rows;
}

namespace {
double parse_number(const std::string& t, const char* what, const std::string& whole) {
  char* end = nullptr;
  const double v = std::strtod(t.c_str(), &end);
  if (t.empty() || end != t.c_str() + t.size() || !std::isfinite(v))
    fail("pcast: {} '{}': '{}' is not a number (expected A, or A:B:STEP)", what, clip(whole), clip(t, 60));
  return v;
}
}  // namespace

std::vector<double> parse_range(const std::string& text, const char* what) {
  std::vector<std::string> parts;
  size_t start = 0;
  for (size_t i = 0; i <= text.size(); ++i)
    if (i == text.size() || text[i] == ':') {
      parts.push_back(text.substr(start, i - start));
      start = i + 1;
    }
  if (parts.size() == 1) return {parse_number(parts[0], what, text)};
  if (parts.size() != 3) fail("pcast: {} '{}': expected A or A:B:STEP", what, clip(text));
  const double a = parse_number(parts[0], what, text), b = parse_number(parts[1], what, text),
               step = parse_number(parts[2], what, text);
  if (!(step > 0)) fail("pcast: {} '{}': STEP must be positive", what, clip(text));
  if (b < a) fail("pcast: {} '{}': expected A <= B", what, clip(text));
  const double n = std::floor((b - a) / step * (1 + 1e-12) + 1e-9);
  if (n > 1e7) fail("pcast: {} '{}': more than 1e7 points", what, clip(text));
  std::vector<double> v;
  for (int64_t i = 0; i <= static_cast<int64_t>(n); ++i) v.push_back(a + static_cast<double>(i) * step);
  return v;
}

std::vector<double> parse_list(const std::string& text, const char* what) {
  std::vector<double> v;
  size_t start = 0;
  for (size_t i = 0; i <= text.size(); ++i)
    if (i == text.size() || text[i] == ',') {
      auto part = parse_range(text.substr(start, i - start), what);
      v.insert(v.end(), part.begin(), part.end());
      start = i + 1;
    }
  return v;
}

}  // namespace attnum::pcast
