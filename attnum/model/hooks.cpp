// Attention hooks backed by the attention engine: prepare the layer once for (spec, condition),
// then run its heads in parallel (each head is one work unit with its own fixed order, so the
// output does not depend on the thread count).
#include "attnum/model/hooks.h"

#include <string>

#include "attnum/attention/engine.h"
#include "attnum/core/parallel.h"
#include "attnum/attention/kernel_spec.h"
#include "attnum/core/error.h"
#include "attnum/core/file.h"

namespace attnum::model {
namespace {

attention::layer_view view_of(const qkv_view& x) {
  return {x.q, x.k, x.v, x.n_head, x.n_head_kv, x.n_tok, x.n_tok, x.d_head};
}

// fp64 reference of the engine (attention::reference_head), rounded to float.
attention_fn engine_reference() {
  return [](int, const qkv_view& x, float* o) {
    const attention::layer_view lv = view_of(x);
    const size_t hs = size_t(x.n_tok) * x.d_head;
    worker_errors errors;
#pragma omp parallel for schedule(dynamic)
    for (int h = 0; h < x.n_head; ++h)
      errors.run([&] {
        const attention::reference_result r = attention::reference_head(lv, h, true);
        for (size_t i = 0; i < hs; ++i) o[h * hs + i] = static_cast<float>(r.o[i]);
      });
    errors.rethrow();
  };
}

attention_fn engine_kernel(const attention::kernel_spec& spec, attention::condition cond,
                           const attention::transform_options& topt = {}) {
  return [spec, cond, topt](int, const qkv_view& x, float* o) {
    const auto prepared = attention::prepare_layer(spec, view_of(x), cond, topt);
    attention::run_heads(*prepared, 0, x.n_head, true, o);  // the heads' tiles shared by the threads
  };
}

}  // namespace

attention_fn reference_attention(std::string_view reference) {
  if (reference == "fp64") return engine_reference();
  if (reference == "bf16") return engine_kernel(attention::preset("bf16"), attention::condition::plain);
  fail("--reference: expected bf16 or fp64, got '{}'", clip(reference));
}

attention_fn kernel_attention(const attention::kernel_spec& kernel, std::string_view condition,
                              const attention::transform_options& topt) {
  const attention::condition cond = attention::parse_condition(condition);
  if (kernel.name == "fp64") {
    if (cond != attention::condition::plain)
      fail("kernel fp64 is the exact reference: only condition plain applies, got '{}'", clip(condition));
    return engine_reference();
  }
  return engine_kernel(kernel, cond, topt);
}

}  // namespace attnum::model
