// fast::exp2f_array against std::exp2f on every one of the 2^32 float bit patterns (~40 s).
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <vector>

#include "attnum/attention/fast_exp2.h"

namespace attnum::attention {
namespace {

TEST(perf_exp2_slow, every_float) {
  constexpr uint32_t kChunk = 1u << 20;
  std::vector<float> x(kChunk), y(kChunk);
  int64_t bad = 0;
  for (uint64_t base = 0; base < (uint64_t{1} << 32); base += kChunk) {
    for (uint32_t i = 0; i < kChunk; ++i) x[i] = std::bit_cast<float>(static_cast<uint32_t>(base + i));
    fast::exp2f_array(x.data(), y.data(), static_cast<int>(kChunk));
    for (uint32_t i = 0; i < kChunk; ++i) {
      const float want = std::exp2f(x[i]);
      if (std::isnan(want) && std::isnan(y[i])) continue;
      if (std::bit_cast<uint32_t>(want) != std::bit_cast<uint32_t>(y[i]) && ++bad <= 5)
        ADD_FAILURE() << "exp2f(" << std::hexfloat << x[i] << ") = " << want << ", array gives " << y[i];
    }
  }
  EXPECT_EQ(bad, 0);
}

}  // namespace
}  // namespace attnum::attention
