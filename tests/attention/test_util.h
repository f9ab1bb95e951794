#pragma once
// Shared helpers of the attention tests: seeded random layers.
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "attnum/attention/engine.h"

namespace attnum::attention::test {

struct layer_data {
  std::vector<float> q, k, v;
  layer_view view;
};

/// Returns a random layer (normal entries times `scale`, seeded).
inline layer_data random_layer(int n_head, int n_head_kv, int n_q, int n_kv, int d, uint64_t seed, float scale = 1.0f) {
  layer_data L;
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> nd(0.0f, scale);
  L.q.resize(static_cast<size_t>(n_head) * n_q * d);
  L.k.resize(static_cast<size_t>(n_head_kv) * n_kv * d);
  L.v.resize(L.k.size());
  for (auto* vec : {&L.q, &L.k, &L.v})
    for (auto& x : *vec) x = nd(rng);
  L.view = {L.q.data(), L.k.data(), L.v.data(), n_head, n_head_kv, n_q, n_kv, d};
  return L;
}

/// The plain-loop oracle of the INT8 QK sums: the exact integer dot product of row qr of q and row
/// kr of k (rows of d integers held as floats), as a double (exact: |sum| <= d * 2^14).
inline double int8_dot(const std::vector<float>& q, int qr, const std::vector<float>& k, int kr, int d) {
  int64_t s = 0;
  for (int t = 0; t < d; ++t)
    s += static_cast<int64_t>(q[static_cast<size_t>(qr) * d + t]) *
         static_cast<int64_t>(k[static_cast<size_t>(kr) * d + t]);
  return static_cast<double>(s);
}

inline void refresh(layer_data& L) { L.view.q = L.q.data(), L.view.k = L.k.data(), L.view.v = L.v.data(); }

/// Wide-range inputs: log-normal magnitudes and a few outliers, so every cast spans many binades.
inline layer_data wide_layer(int n_head, int n_head_kv, int n, int d, uint64_t seed) {
  auto L = random_layer(n_head, n_head_kv, n, n, d, seed);
  std::mt19937_64 rng(seed * 7 + 1);
  std::normal_distribution<float> nd(0.0f, 2.5f);
  for (auto* x : {&L.q, &L.k, &L.v})
    for (auto& e : *x) e *= std::exp(nd(rng));
  L.k[3] = 900.0f, L.q[10] = -500.0f, L.v[7] = 300.0f;
  refresh(L);
  return L;
}

}  // namespace attnum::attention::test
