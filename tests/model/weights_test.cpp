// Weights held as stored: a matrix's 16-bit codes widen exactly (every BF16 and F16 code against
// the format's own decode), rounding to bf16 is the RNE cast element by element, and the linear
// layers and the whole forward on BF16/F16-stored weights equal the same forward on the widened
// fp32 values bit for bit (fp32 and bf16 linear precision, one and two threads).
#include <gtest/gtest.h>

#include <bit>
#include <cstring>
#include <cmath>
#include <cstdlib>
#include <random>

#include <fmt/format.h>

#include "attnum/core/error.h"
#include "attnum/core/parallel.h"
#include "attnum/formats/format.h"
#include "attnum/model/transformer.h"
#include "attnum/model/weights.h"
#include "tests/model/tiny_model.h"

namespace {
using attnum::io::st_dtype;
using attnum::model::matrix;
namespace formats = attnum::formats;

std::vector<uint16_t> every_code() {
  std::vector<uint16_t> c(65536);
  for (uint32_t i = 0; i < 65536; ++i) c[i] = uint16_t(i);
  return c;
}

bool same_bits(float a, float b) { return std::bit_cast<uint32_t>(a) == std::bit_cast<uint32_t>(b); }

TEST(weights_test, every_bf16_and_f16_code_widens_to_its_value) {
  for (auto [dtype, f] : {std::pair{st_dtype::BF16, formats::format::bf16}, {st_dtype::F16, formats::format::fp16}}) {
    const matrix m = matrix::from_bits(dtype, every_code());
    ASSERT_EQ(m.size(), 65536u);
    EXPECT_EQ(m.bytes(), 2u * 65536);
    EXPECT_EQ(m.f32(), nullptr);
    const std::vector<float> v = m.to_float();
    int wrong = 0;
    for (uint32_t c = 0; c < 65536; ++c) {
      const double want = formats::decode(f, c);
      if (std::isnan(want) ? !std::isnan(v[c]) : !same_bits(v[c], float(want))) ++wrong;
    }
    EXPECT_EQ(wrong, 0) << formats::info(f).name;
    // A range from the middle, and one element.
    float part[3];
    m.widen(1000, 3, part);
    for (int i = 0; i < 3; ++i) EXPECT_TRUE(same_bits(part[i], v[1000 + i]));
    EXPECT_TRUE(same_bits(m[4242], v[4242]));
  }
}

TEST(weights_test, rounding_to_bf16_is_the_rne_cast_of_each_element) {
  std::mt19937_64 rng(5);
  std::vector<float> x = attnum::test::random_vec(10007, rng, 3.0f);  // not a multiple of any chunk
  x[0] = 0x1.00808p0f;                                                // a tie below: rounds to even
  x[1] = -0x1.01800p0f;                                               // a tie: rounds up to even
  const matrix f32(x);
  ASSERT_NE(f32.f32(), nullptr);
  const matrix b = f32.rounded_to_bf16();
  EXPECT_EQ(b.dtype(), st_dtype::BF16);
  EXPECT_EQ(b.bytes(), x.size() * 2);
  const std::vector<float> got = b.to_float();
  int wrong = 0;
  for (size_t i = 0; i < x.size(); ++i) wrong += !same_bits(got[i], formats::quantize_bf16(x[i]));
  EXPECT_EQ(wrong, 0);
  // Values, not storage, decide equality; a changed element is seen.
  std::vector<float> r = got;
  EXPECT_TRUE(b == matrix(r));
  r[9999] = std::nextafter(r[9999], 10.0f);
  EXPECT_FALSE(b == matrix(r));
  EXPECT_FALSE(b == f32);  // x has elements bf16 cannot hold
  // Rounding an F16 matrix goes through its values; a BF16 matrix is already rounded.
  const matrix h = matrix::from_bits(st_dtype::F16, std::vector<uint16_t>{0x3c01, 0x3c02, 0xbc03});
  const std::vector<float> hb = h.rounded_to_bf16().to_float();
  for (size_t i = 0; i < 3; ++i) EXPECT_TRUE(same_bits(hb[i], formats::quantize_bf16(h[i])));
  EXPECT_TRUE(b.rounded_to_bf16() == b);
}

TEST(weights_test, unaligned_fp32_data_is_copied_and_other_dtypes_refused) {
  std::vector<uint8_t> bytes(4 * 5 + 1);
  const float vals[5] = {1.5f, -2.25f, 3.0f, 0.125f, -7.0f};
  std::memcpy(bytes.data() + 1, vals, sizeof vals);
  const matrix m(st_dtype::F32, bytes.data() + 1, 5, nullptr);
  ASSERT_NE(m.f32(), nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(m.f32()) % alignof(float), 0u);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(m[i], vals[i]);
  EXPECT_THROW(matrix(st_dtype::I8, bytes.data(), 4, nullptr), attnum::error);
}

// The fp32 path is the one every earlier result came from; the 16-bit path must equal it.
TEST(weights_test, linear_on_16_bit_weights_equals_the_widened_fp32_gemm_bit_for_bit) {
  std::mt19937_64 rng(9);
  for (auto [n, in, out] : {std::tuple{7, 33, 5}, {64, 96, 600}, {300, 128, 513}}) {
    const std::vector<float> x = attnum::test::random_vec(size_t(n) * in, rng, 1.0f);
    const matrix b = matrix(attnum::test::random_vec(size_t(out) * in, rng, 1.0f)).rounded_to_bf16();
    std::vector<uint16_t> hc(size_t(out) * in);
    for (auto& c : hc) c = uint16_t(rng() & 0x3bff);  // finite fp16 codes of magnitude < 1
    const matrix h = matrix::from_bits(st_dtype::F16, hc);
    for (const matrix* w : {&b, &h}) {
      const std::vector<float> wf = w->to_float();
      for (int t : {1, 2}) {
        attnum::set_threads(t);
        std::vector<float> want(size_t(n) * out), got(want.size());
        attnum::model::linear(x.data(), n, in, wf.data(), out, want.data());
        attnum::model::linear(x.data(), n, in, *w, out, got.data());
        int wrong = 0;
        for (size_t i = 0; i < got.size(); ++i) wrong += !same_bits(got[i], want[i]);
        EXPECT_EQ(wrong, 0) << "n " << n << " in " << in << " out " << out << " threads " << t;
      }
    }
  }
  attnum::set_threads(0);
}

attnum::model::weights widened(attnum::model::weights w) {
  using attnum::model::matrix;
  w.tok_embeddings = matrix(w.tok_embeddings.to_float());
  w.classifier = matrix(w.classifier.to_float());
  for (auto& l : w.layers)
    for (matrix* m : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w1, &l.w2, &l.w3}) *m = matrix(m->to_float());
  return w;
}

TEST(weights_test, forward_on_bf16_stored_weights_equals_the_fp32_copy_bit_for_bit) {
  using namespace attnum::model;
  weights w = attnum::test::tiny_model(3, true, rope_style::rotate_half);
  round_to_bf16(w);
  ASSERT_EQ(w.layers[0].wq.dtype(), st_dtype::BF16);
  ASSERT_EQ(w.tok_embeddings.dtype(), st_dtype::BF16);
  const weights f = widened(w);
  ASSERT_EQ(f.layers[0].wq.dtype(), st_dtype::F32);
  EXPECT_LT(w.bytes(), f.bytes());
  std::vector<int> ids;
  for (int i = 0; i < 40; ++i) ids.push_back((i * 7 + 3) % w.cfg.vocab_size);
  for (linear_precision p : {linear_precision::fp32, linear_precision::bf16}) {
    forward_options o;
    o.linear = p;
    const std::vector<float> a = forward(w, ids, o), b = forward(f, ids, o);
    ASSERT_EQ(a.size(), b.size());
    int wrong = 0;
    for (size_t i = 0; i < a.size(); ++i) wrong += !same_bits(a[i], b[i]);
    EXPECT_EQ(wrong, 0) << name(p);
  }
}

}  // namespace

// What capture and loss hold besides the forward's activations (docs/model.md, "Weights in
// memory"), the weights' bytes as a run prepares them, and the up-front refusal naming them.
TEST(weights_test, activation_formulas_and_the_up_front_memory_refusal) {
  using namespace attnum::model;
  weights w = attnum::test::tiny_model(31);
  const config& c = w.cfg;
  const int n = 40;
  const size_t f = forward_activation_bytes(c, n), hd = size_t(c.n_head) * c.d_head,
               kvd = size_t(c.n_head_kv) * c.d_head;
  EXPECT_EQ(capture_activation_bytes(c, n) - f, 4 * size_t(c.n_layers) * n * (hd + 2 * kvd));
  EXPECT_EQ(loss_activation_bytes(c, n, false) - f, 4 * size_t(n) * c.vocab_size);
  EXPECT_EQ(loss_activation_bytes(c, n, true), f);
  // bf16 linear precision: the weights' bytes after round_to_bf16, known before it runs.
  EXPECT_EQ(weight_bytes(w, linear_precision::fp32), w.bytes());
  const size_t as_bf16 = weight_bytes(w, linear_precision::bf16);
  weights r = w;
  round_to_bf16(r);
  EXPECT_EQ(as_bf16, r.bytes());
  EXPECT_LT(as_bf16, w.bytes());
  EXPECT_NO_THROW(check_memory(w, linear_precision::fp32, f, "test"));
  ::setenv("ATTNUM_MAX_ALLOC_GIB", "0.00001", 1);  // about 10 KB: less than the weights
  try {
    check_memory(w, linear_precision::bf16, f, "loss: tiny with windows of 40 tokens");
    ADD_FAILURE() << "not refused";
  } catch (const attnum::error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("loss: tiny with windows of 40 tokens needs"), std::string::npos) << m;
    EXPECT_NE(m.find(fmt::format("weights {:.3g} GiB as bf16", double(as_bf16) / double(1u << 30))), std::string::npos)
        << m;
    EXPECT_NE(m.find("activations"), std::string::npos) << m;
  }
  ::unsetenv("ATTNUM_MAX_ALLOC_GIB");
}
