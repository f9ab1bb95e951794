// Fallback hooks used until the attention engine lands: fp64 plain loops and a private native-BF16
// flash-style attention (P rounded to bf16 before P.V). Kernel presets need the engine.
#include "attnum/model/hooks.h"

#include <cmath>
#include <vector>

#include "attnum/core/error.h"
#include "attnum/formats/format.h"

namespace attnum::model {
namespace {
attention_fn bf16_fallback() {
  return [](int, const qkv_view& x, float* o) {
    const int group = x.n_head / x.n_head_kv, n = x.n_tok, d = x.d_head;
    const size_t hs = size_t(n) * d;
#pragma omp parallel for schedule(dynamic)
    for (int h = 0; h < x.n_head; ++h) {
      const float *q = x.q + h * hs, *k = x.k + (h / group) * hs, *v = x.v + (h / group) * hs;
      std::vector<float> s(n), acc(d);
      const float scale = 1.0f / std::sqrt(float(d));
      for (int i = 0; i < n; ++i) {
        float mx = -INFINITY;
        for (int j = 0; j <= i; ++j) {
          float a = 0;
          for (int c = 0; c < d; ++c)
            a += formats::quantize_bf16(q[i * d + c]) * formats::quantize_bf16(k[j * d + c]);
          s[j] = a * scale;
          mx = std::max(mx, s[j]);
        }
        float sum = 0;
        std::fill(acc.begin(), acc.end(), 0.0f);
        for (int j = 0; j <= i; ++j) {
          float p = std::exp(s[j] - mx);
          sum += p;
          p = formats::quantize_bf16(p);
          for (int c = 0; c < d; ++c) acc[c] += p * formats::quantize_bf16(v[j * d + c]);
        }
        for (int c = 0; c < d; ++c) o[h * hs + i * d + c] = formats::quantize_bf16(acc[c] / sum);
      }
    }
  };
}
}  // namespace

attention_fn reference_attention(std::string_view reference) {
  if (reference == "fp64") return fp64_attention();
  if (reference == "bf16") return bf16_fallback();
  fail("--reference: expected bf16 or fp64, got '{}'", reference);
}

attention_fn kernel_attention(std::string_view kernel, std::string_view condition) {
  if (condition != "plain" && condition != "tile")
    fail("condition '{}' needs the attention engine, which this build lacks", condition);
  if (kernel == "fp64") return fp64_attention();
  if (kernel == "fp32") return fp32_attention();
  if (kernel == "bf16") return bf16_fallback();
  fail("kernel preset '{}' needs the attention engine, which this build lacks", kernel);
}

}  // namespace attnum::model
