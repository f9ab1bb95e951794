#pragma once
// SplitMix64 (Steele, Lea, Flood 2014): the project's one seedable, portable random stream. Every
// seeded quantity (rotation signs, the synthetic zoo, the bootstrap, the P-cast simulation, the
// predictor's probes) draws from it, so the same seed gives the same bits on any machine
// (std:: distributions are not portable).
#include <cmath>
#include <cstdint>
#include <numbers>

namespace attnum::core {

struct splitmix64 {
  uint64_t state;
  explicit splitmix64(uint64_t seed) : state(seed) {}
  /// The next 64 random bits.
  uint64_t next() {
    uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  /// Uniform in [0, 1) with 53 random bits.
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  /// Uniform in (0, 1): the 53-bit grid shifted by half a step (never 0 or 1).
  double uniform_open() { return (static_cast<double>(next() >> 11) + 0.5) * 0x1.0p-53; }
  /// Uniform integer in [0, n) (multiply-shift; bias below 2^-32 for n < 2^32).
  uint64_t below(uint64_t n) { return static_cast<uint64_t>((static_cast<unsigned __int128>(next()) * n) >> 64); }
  /// Standard normal (Box-Muller from two uniforms, u1 in (0, 1] so log(u1) is finite).
  double normal() {
    const double u1 = 1.0 - uniform();
    const double u2 = uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
  }
  /// A sign, +1 or -1, from the top bit of the next draw (the rotations' random signs).
  double sign() { return (next() >> 63) ? -1.0 : 1.0; }
};

}  // namespace attnum::core
