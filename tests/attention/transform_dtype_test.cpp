// The transform dtype and user rotations at the engine's input: prepare_layer's
// transformed Q and K against a plain-loop oracle (centering / x·R in long double, rounded by the
// brute-force nearest-value reference); --knob transform_dtype=fp32 against the fp32 transform path
// (a float rounding of the double FWHT, reimplemented here); and `attnum attend --rotation R.npy`
// against the independent FA3 oracle fed Q·R and K·R rounded to bf16.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "attention/preset_oracle.h"
#include "attention/test_util.h"
#include "attnum/attention/engine.h"
#include "attnum/attention/reference.h"
#include "attnum/core/error.h"
#include "attnum/io/npy.h"
#include "attnum/transforms/hadamard.h"
#include "cli_util.h"
#include "formats/oracle.h"

namespace attnum::attention {
namespace {

using formats::format;

float oracle_round(format f, double x) {
  if (f == format::fp32) return static_cast<float>(x);
  static const ::oracle::nearest_reference bf(format::bf16), hf(format::fp16);
  const auto& ref = f == format::bf16 ? bf : hf;
  const auto code = ref.magnitude_code(std::fabs(x));
  return static_cast<float>(std::copysign(code ? ref.values[*code] : INFINITY, x));
}

// rows [n, d] times R [d, d] in long double, each result rounded once to f.
std::vector<float> times_r(const float* x, int64_t n, int d, const std::vector<double>& R, format f) {
  std::vector<float> y(static_cast<size_t>(n) * d);
  for (int64_t r = 0; r < n; ++r)
    for (int j = 0; j < d; ++j) {
      long double s = 0;
      for (int i = 0; i < d; ++i) s += static_cast<long double>(x[r * d + i]) * R[static_cast<size_t>(i) * d + j];
      y[r * d + j] = oracle_round(f, static_cast<double>(s));
    }
  return y;
}

// Full-sequence centering of each kv head's keys [n, d], rounded to f.
std::vector<float> centered(const std::vector<float>& k, int heads, int n, int d, format f) {
  std::vector<float> out(k.size());
  for (int g = 0; g < heads; ++g)
    for (int c = 0; c < d; ++c) {
      double mean = 0;
      for (int t = 0; t < n; ++t) mean += k[(static_cast<size_t>(g) * n + t) * d + c];
      mean /= n;
      for (int t = 0; t < n; ++t) {
        const size_t i = (static_cast<size_t>(g) * n + t) * d + c;
        out[i] = oracle_round(f, k[i] - mean);
      }
    }
  return out;
}

TEST(transform_dtype_test, prepared_q_k_are_the_oracle_rounding) {
  const int nh = 4, nkv = 2, n = 40, d = 64;
  auto L = test::random_layer(nh, nkv, n, n, d, 31, 1.7f);
  const auto R = transforms::rotation().matrix(d);
  for (const char* dtype : {"bf16", "fp16", "fp32"}) {
    const kernel_spec spec = apply_knobs(preset("fa3"), {std::string("transform_dtype=") + dtype});
    const format f = spec.transform_dtype;
    for (condition cond : {condition::plain, condition::rotate, condition::center, condition::center_rotate}) {
      const auto p = prepare_layer(spec, L.view, cond);
      std::vector<float> q = L.q, k = L.k;
      if (cond == condition::center || cond == condition::center_rotate) k = centered(k, nkv, n, d, f);
      if (cond == condition::rotate || cond == condition::center_rotate) {
        q = times_r(q.data(), int64_t(nh) * n, d, R, f);
        k = times_r(k.data(), int64_t(nkv) * n, d, R, f);
      }
      const std::string what = std::string(dtype) + " " + std::string(condition_name(cond));
      EXPECT_EQ(p->q, q) << what;
      EXPECT_EQ(p->k, k) << what;
      EXPECT_EQ(p->v, L.v) << what;  // V is never transformed
    }
  }
  // The rounding is real: bf16 and fp32 transformed operands differ.
  const auto a = prepare_layer(preset("fa3"), L.view, condition::rotate);
  const auto b = prepare_layer(apply_knobs(preset("fa3"), {"transform_dtype=fp32"}), L.view, condition::rotate);
  EXPECT_NE(a->q, b->q);
  EXPECT_THROW(apply_knobs(preset("fa3"), {"transform_dtype=e4m3fn"}), attnum::error);
  EXPECT_EQ(to_json(preset("fa3"))["transform_dtype"], "bf16");
}

// The operands of every version before the transform dtype: the rotation in double rounded to
// float (x ∘ s, butterflies, times 1/sqrt(d)), the centering x - mean rounded to float.
void old_rotate(float* x, int64_t rows, int d, uint64_t seed) {
  const auto s = transforms::random_signs(d, seed);
  std::vector<double> b(d);
  for (int64_t r = 0; r < rows; ++r) {
    for (int c = 0; c < d; ++c) b[c] = x[r * d + c] * s[c];
    for (int h = 1; h < d; h *= 2)
      for (int i = 0; i < d; i += 2 * h)
        for (int j = i; j < i + h; ++j) {
          const double u = b[j], v = b[j + h];
          b[j] = u + v, b[j + h] = u - v;
        }
    for (int c = 0; c < d; ++c) x[r * d + c] = static_cast<float>(b[c] * (1.0 / std::sqrt(static_cast<double>(d))));
  }
}

TEST(transform_dtype_test, fp32_knob_is_the_previous_path_bit_for_bit) {
  const int nh = 2, nkv = 1, n = 70, d = 128;
  auto L = test::random_layer(nh, nkv, n, n, d, 32, 0.9f);
  for (const char* name : {"fa3", "sage2pp-sm89"}) {
    const kernel_spec spec = apply_knobs(preset(name), {"transform_dtype=fp32"});
    for (condition cond : {condition::rotate, condition::center, condition::center_rotate}) {
      std::vector<float> q = L.q, k = L.k;
      if (cond != condition::rotate) k = centered(k, nkv, n, d, format::fp32);
      if (cond != condition::center) {
        old_rotate(q.data(), nh * n, d, 0x5eed);
        old_rotate(k.data(), nkv * n, d, 0x5eed);
      }
      const auto p = prepare_layer(spec, L.view, cond);
      EXPECT_EQ(p->q, q) << name;
      if (!spec.smooth_k) {
        EXPECT_EQ(p->k, k) << name;  // Sage's prepared k is after smooth_k
      }
      // The kernel then sees exactly these operands: the same output as feeding them under plain.
      auto T = L;
      T.q = q, T.k = k;
      test::refresh(T);
      EXPECT_EQ(run_layer(spec, L.view, cond), run_layer(spec, T.view, condition::plain)) << name;
    }
  }
}

double rel_to_ref(const std::vector<float>& o, const std::vector<double>& ref) {
  double num = 0, den = 0;
  for (size_t i = 0; i < o.size(); ++i) num += std::pow(o[i] - ref[i], 2), den += ref[i] * ref[i];
  return std::sqrt(num / den);
}

class rotation_cli_test : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("attnum_rotation_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string path(const std::string& n) const { return (dir_ / n).string(); }
  std::string attend(const std::string& extra) const {
    return "attend --q " + path("q.npy") + " --k " + path("k.npy") + " --v " + path("v.npy") + " " + extra;
  }
  std::filesystem::path dir_;
};

// The contract: attend --kernel fa3 --condition rotate --rotation R.npy rounds Q·R and
// K·R to bf16 before FA3's casts. The independent FA3 oracle fed bf16(Q·R), bf16(K·R) (computed
// here in long double) agrees with attnum bit for bit; both are ~1e-2 from fp64 attention.
TEST_F(rotation_cli_test, attend_rotation_file_matches_independent_fa3_oracle) {
  const int n = 96, d = 64;
  auto L = test::random_layer(1, 1, n, n, d, 33, 1.3f);
  for (int t = 0; t < n; ++t) L.k[t * d + 7] += 5.0f;  // a shared key offset: the casts see structure
  io::write_npy(path("q.npy"), L.q.data(), {n, d});
  io::write_npy(path("k.npy"), L.k.data(), {n, d});
  io::write_npy(path("v.npy"), L.v.data(), {n, d});
  // R: the plain Hadamard with channels (2, 9) turned by 0.7 rad: orthogonal, dense, not Hadamard.
  auto R = transforms::rotation::hadamard().matrix(d);
  for (int i = 0; i < d; ++i) {
    const double a = R[i * d + 2], b = R[i * d + 9];
    R[i * d + 2] = std::cos(0.7) * a - std::sin(0.7) * b, R[i * d + 9] = std::sin(0.7) * a + std::cos(0.7) * b;
  }
  io::write_npy(path("r.npy"), R.data(), {d, d});
  const auto r = attnum::test::run_attnum(
      attend("--kernel fa3 --condition rotate --rotation " + path("r.npy") + " --out " + path("o.npy") + " --json"),
      false);
  ASSERT_EQ(r.status, 0) << r.out;
  const auto rows = nlohmann::json::parse(r.out);
  EXPECT_EQ(rows[0]["rotation"], path("r.npy"));
  EXPECT_EQ(rows[0]["transform_dtype"], "bf16");
  const auto got = io::read_npy(path("o.npy")).data;

  auto T = L;
  T.q = times_r(L.q.data(), n, d, R, format::bf16);
  T.k = times_r(L.k.data(), n, d, R, format::bf16);
  test::refresh(T);
  const auto want = oracle::run_fa3_like(T, 0, true, {false, oracle::fa3_like::fa3});
  size_t differ = 0;
  for (size_t i = 0; i < got.size(); ++i) differ += std::memcmp(&got[i], &want[i], 4) != 0;
  EXPECT_EQ(differ, 0u);
  std::vector<double> q(L.q.begin(), L.q.end()), k(L.k.begin(), L.k.end()), v(L.v.begin(), L.v.end());
  const auto ref = reference_attention(q.data(), k.data(), v.data(), n, n, d, true);
  const double e_got = rel_to_ref(got, ref.o), e_want = rel_to_ref(want, ref.o);
  double num = 0, den = 0;
  for (size_t i = 0; i < got.size(); ++i)
    num += std::pow(double(got[i]) - want[i], 2), den += double(want[i]) * want[i];
  EXPECT_GT(e_got, 1e-3);
  EXPECT_GT(e_want, 1e-3);
  EXPECT_LT(std::sqrt(num / den), 1e-3 * e_got);
  // Without the bf16 rounding (transform_dtype fp32) the output moves away from the oracle.
  const auto r32 =
      attnum::test::run_attnum(attend("--kernel fa3 --knob transform_dtype=fp32 --condition rotate --rotation " +
                                      path("r.npy") + " --out " + path("o32.npy")));
  ASSERT_EQ(r32.status, 0) << r32.out;
  EXPECT_NE(io::read_npy(path("o32.npy")).data, want);
  EXPECT_EQ(r32.out.find("warning"), std::string::npos) << r32.out;  // fp32: nothing is rounded
  // At bf16 the fp32 inputs are flagged: plain would use them unrounded.
  const auto rw = attnum::test::run_attnum(attend("--kernel fa3 --condition rotate --rotation " + path("r.npy")));
  EXPECT_NE(rw.out.find("warning: --q/--k hold values that are not bf16"), std::string::npos) << rw.out;
}

// An .npy holding the default's own matrix (float64) gives the default's bits.
TEST_F(rotation_cli_test, default_matrix_file_is_bit_identical_to_the_default) {
  const int n = 50, d = 128;
  auto L = test::random_layer(2, 1, n, n, d, 34);
  io::write_npy(path("q.npy"), L.q.data(), {2, n, d});
  io::write_npy(path("k.npy"), L.k.data(), {1, n, d});
  io::write_npy(path("v.npy"), L.v.data(), {1, n, d});
  const auto R = transforms::rotation().matrix(d);
  io::write_npy(path("r.npy"), R.data(), {d, d});
  for (const char* cond : {"rotate", "center+rotate"}) {
    ASSERT_EQ(attnum::test::run_attnum(
                  attend(std::string("--kernel sage2pp-sm89 --condition ") + cond + " --out " + path("a.npy")))
                  .status,
              0);
    ASSERT_EQ(attnum::test::run_attnum(attend(std::string("--kernel sage2pp-sm89 --condition ") + cond +
                                              " --rotation " + path("r.npy") + " --out " + path("b.npy")))
                  .status,
              0);
    EXPECT_EQ(io::read_npy(path("a.npy")).data, io::read_npy(path("b.npy")).data) << cond;
  }
  // Another seed is another matrix.
  ASSERT_EQ(attnum::test::run_attnum(
                attend("--kernel fa3 --condition rotate --rotation random-hadamard:7 --out " + path("c.npy")))
                .status,
            0);
  ASSERT_EQ(attnum::test::run_attnum(attend("--kernel fa3 --condition rotate --out " + path("a.npy"))).status, 0);
  EXPECT_NE(io::read_npy(path("a.npy")).data, io::read_npy(path("c.npy")).data);
}

TEST_F(rotation_cli_test, bad_rotation_file_kernel_or_knob_exits_2_naming_it) {
  const int n = 8, d = 16;
  auto L = test::random_layer(1, 1, n, n, d, 35);
  io::write_npy(path("q.npy"), L.q.data(), {n, d});
  io::write_npy(path("k.npy"), L.k.data(), {n, d});
  io::write_npy(path("v.npy"), L.v.data(), {n, d});
  std::vector<double> rect(d * 8, 0.0);
  io::write_npy(path("rect.npy"), rect.data(), {8, d});
  auto R8 = transforms::rotation::hadamard().matrix(8);
  io::write_npy(path("r8.npy"), R8.data(), {8, 8});
  auto Rs = transforms::rotation::hadamard().matrix(d);
  Rs[0] *= 1.01;
  io::write_npy(path("skew.npy"), Rs.data(), {d, d});
  Rs[0] = NAN;
  io::write_npy(path("nan.npy"), Rs.data(), {d, d});
  const std::pair<std::string, std::string> cases[] = {
      {"--kernel fa3 --condition rotate --rotation " + path("rect.npy"),
       path("rect.npy") + ": a rotation must be a square"},
      {"--kernel fa3 --condition rotate --rotation " + path("r8.npy"),
       path("r8.npy") + ": the rotation is [8, 8] but the head dim is 16"},
      {"--kernel fa3 --condition rotate --rotation " + path("skew.npy"),
       path("skew.npy") + ": rotation is not orthogonal"},
      {"--kernel fa3 --condition rotate --rotation " + path("nan.npy"),
       path("nan.npy") + ": rotation entry [0, 0] is not finite"},
      {"--kernel fa3 --condition rotate --rotation " + path("missing.npy"), path("missing.npy")},
      {"--kernel fa3 --rotation nonsense", "--rotation 'nonsense'"},
      {"--kernel nope", "unknown kernel preset 'nope'"},
      {"--kernel fa3 --knob nope=1", "unknown knob 'nope'"},
      {"--kernel fa3 --knob transform_dtype=int8", "knob transform_dtype: 'int8' is not a transform dtype"}};
  for (const auto& [args, msg] : cases) {
    const auto r = attnum::test::run_attnum(attend(args + " --out " + path("o.npy")));
    EXPECT_EQ(r.status, 2) << args << "\n" << r.out;
    EXPECT_NE(r.out.find(msg), std::string::npos) << args << "\n" << r.out;
    EXPECT_FALSE(std::filesystem::exists(path("o.npy"))) << args;
  }
}

}  // namespace
}  // namespace attnum::attention
