// The synthetic illustration (see illustrate.h for the arithmetic).
#include "attnum/report/illustrate.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "attnum/attention/engine.h"
#include "attnum/core/error.h"
#include "attnum/formats/format.h"
#include "attnum/formats/scale.h"
#include "attnum/transforms/hadamard.h"

namespace attnum::report {
namespace {

constexpr int kD = kIllustrationDim;
constexpr int kN = kIllustrationKeys;

// The fixed operands. The query's first coordinate is non-zero so that the common key
// coordinate really shifts every score (by q[0]*common/sqrt(8)); the other coordinates are
// O(1) so the exact weights are visibly unequal.
constexpr ivec kQuery = {1.0, 1.6, -1.2, 0.7, 1.9, -0.8, 1.1, -1.5};
constexpr ikeys kKeyRest = {{{0, 0.9, -0.6, 1.3, 0.4, -1.1, 0.2, -0.7},
                             {0, -0.5, 1.0, -0.3, 1.2, 0.6, -0.9, 0.8},
                             {0, 1.4, 0.3, 0.5, -0.8, -0.2, 1.1, -1.3},
                             {0, -1.0, -1.2, 0.9, 0.1, 0.7, 0.5, 0.6}}};

// The rotation is the study's: the same seeded random-sign Hadamard (transforms/hadamard.h) with
// the engine's default seed, so the illustration shows the rotation the measured heads used.
const uint64_t kSignSeed = transforms::kDefaultRotationSeed;

// Returns x (s) H8 / sqrt(8), computed in double by transforms::rotate_rows.
ivec rotate(const ivec& x) {
  ivec y = x;
  transforms::rotate_rows(y.data(), 1, kD, kSignSeed);
  return y;
}

// The E4M3 per-tensor cast of the engine (formats/scale.h, the one scaled cast).
const formats::scale_spec kE4m3 = {};  // e4m3fn, per tensor, amax / 448, RNE satfinite

float amax_of(const ivec* v, int n) {
  float amax = 0;
  for (int r = 0; r < n; ++r)
    for (double x : v[r]) amax = std::max(amax, std::fabs(float(x)));
  return amax;
}

// Max-based E4M3 scale of a set of vectors: amax/448 in float32 (448 = 1.75 * 2^8 is E4M3's
// largest finite value); an all-zero tensor gets scale 1 (formats/scale.h's all-zero rule).
float e4m3_scale(const ivec* v, int n) { return formats::group_scale(amax_of(v, n), kE4m3); }

// Dequantized E4M3 cast of one vector with scale s: float32 x/s, cvt.rn.satfinite, then times s
// in fp64 (exact: a 4-bit significand times a float32 scale fits a double).
ivec cast_e4m3(const ivec& x, float s) {
  ivec y{};
  for (int i = 0; i < kD; ++i) y[i] = double(formats::cast_in_group(float(x[i]), 0.0, s, kE4m3)) * double(s);
  return y;
}

// Softmax over the four scores q.k_j / sqrt(8), in fp64, max-subtracted.
iweights weights(const ivec& q, const ikeys& k) {
  iweights s{};
  for (int j = 0; j < kN; ++j) {
    double acc = 0;
    for (int i = 0; i < kD; ++i) acc += q[i] * k[j][i];
    s[j] = acc / std::sqrt(double(kD));
  }
  const double m = *std::max_element(s.begin(), s.end());
  double sum = 0;
  for (double& x : s) sum += (x = std::exp(x - m));
  for (double& x : s) x /= sum;
  return s;
}

double total_variation(const iweights& a, const iweights& b) {
  double tv = 0;
  for (int j = 0; j < kN; ++j) tv += std::fabs(a[j] - b[j]);
  return 0.5 * tv;
}

}  // namespace

ivec illustration_signs() {
  const std::vector<double> s = transforms::random_signs(kD, kSignSeed);
  ivec out{};
  std::copy(s.begin(), s.end(), out.begin());
  return out;
}

std::vector<double> illustration_commons() {
  std::vector<double> c;
  for (int i = 0; i <= 120; ++i) c.push_back(2.0 * i);
  return c;
}

illustration illustrate(double common, bool center) {
  if (!std::isfinite(common) || std::fabs(common) > 1e6)
    fail("illustrate: --common must be a finite number with |common| <= 1e6, got {}", common);
  illustration r;
  r.common = common;
  r.center = center;
  r.q = kQuery;
  ikeys original = kKeyRest;
  for (auto& k : original) k[0] = common;
  r.w_exact = weights(r.q, original);

  // 1. Optional key centering (mean over the four keys, per channel).
  r.k = original;
  if (center) {
    for (int i = 0; i < kD; ++i) {
      double mean = 0;
      for (int j = 0; j < kN; ++j) mean += original[j][i];
      mean /= kN;
      for (int j = 0; j < kN; ++j) r.k[j][i] = original[j][i] - mean;
    }
  }
  // 2. FP8 without rotation: one scale for Q, one for K.
  r.scale_q = e4m3_scale(&r.q, 1);
  r.scale_k = e4m3_scale(r.k.data(), kN);
  r.q_fp8 = cast_e4m3(r.q, float(r.scale_q));
  for (int j = 0; j < kN; ++j) r.k_fp8[j] = cast_e4m3(r.k[j], float(r.scale_k));
  r.w_fp8 = weights(r.q_fp8, r.k_fp8);
  // 3. FP8 after the same rotation of Q and K; scales from the rotated tensors.
  r.q_rot = rotate(r.q);
  for (int j = 0; j < kN; ++j) r.k_rot[j] = rotate(r.k[j]);
  r.scale_q_rot = e4m3_scale(&r.q_rot, 1);
  r.scale_k_rot = e4m3_scale(r.k_rot.data(), kN);
  r.q_rot_fp8 = cast_e4m3(r.q_rot, float(r.scale_q_rot));
  for (int j = 0; j < kN; ++j) r.k_rot_fp8[j] = cast_e4m3(r.k_rot[j], float(r.scale_k_rot));
  r.w_fp8_rot = weights(r.q_rot_fp8, r.k_rot_fp8);

  r.tv_fp8 = total_variation(r.w_fp8, r.w_exact);
  r.tv_fp8_rot = total_variation(r.w_fp8_rot, r.w_exact);
  return r;
}

nlohmann::json illustration_rows(const illustration& ill) {
  nlohmann::json rows = nlohmann::json::array();
  auto base = [&](const std::string& name) {
    return nlohmann::json{{"vector", name},
                          {"common", ill.common},
                          {"center", ill.center},
                          {"tv_fp8", ill.tv_fp8},
                          {"tv_fp8_rot", ill.tv_fp8_rot}};
  };
  nlohmann::json q = base("q");
  q["original"] = ill.q;
  q["fp8"] = ill.q_fp8;
  q["rotated"] = ill.q_rot;
  q["rotated_fp8"] = ill.q_rot_fp8;
  q["scale"] = ill.scale_q;
  q["scale_rot"] = ill.scale_q_rot;
  q["w_exact"] = q["w_fp8"] = q["w_fp8_rot"] = nullptr;
  rows.push_back(q);
  for (int j = 0; j < kN; ++j) {
    nlohmann::json k = base(std::string("k").append(std::to_string(j + 1)));
    k["original"] = ill.k[j];
    k["fp8"] = ill.k_fp8[j];
    k["rotated"] = ill.k_rot[j];
    k["rotated_fp8"] = ill.k_rot_fp8[j];
    k["scale"] = ill.scale_k;
    k["scale_rot"] = ill.scale_k_rot;
    k["w_exact"] = ill.w_exact[j];
    k["w_fp8"] = ill.w_fp8[j];
    k["w_fp8_rot"] = ill.w_fp8_rot[j];
    rows.push_back(k);
  }
  return rows;
}

nlohmann::json illustration_json(const illustration& ill) {
  nlohmann::json keys = nlohmann::json::array();
  for (int j = 0; j < kN; ++j) keys.push_back({ill.k[j], ill.k_fp8[j], ill.k_rot_fp8[j]});
  return {{"common", ill.common},
          {"center", ill.center},
          {"w_exact", ill.w_exact},
          {"w_fp8", ill.w_fp8},
          {"w_fp8_rot", ill.w_fp8_rot},
          {"tv_fp8", ill.tv_fp8},
          {"tv_fp8_rot", ill.tv_fp8_rot},
          {"q", {ill.q, ill.q_fp8, ill.q_rot_fp8}},
          {"k", keys},
          {"scales", {ill.scale_q, ill.scale_k, ill.scale_q_rot, ill.scale_k_rot}}};
}

}  // namespace attnum::report
