// The runtime ISA paths (attention/isa.h) against each other and the independent oracles: every
// path this machine supports (scalar, avx2, avx512, amx) runs every preset, bit for bit equal to
// the scalar path, and the presets that have a plain-loop oracle (preset_oracle.h) match it on
// every path; the double-FMA chunk GEMM (fma_gemm.h) against a plain double loop on extreme
// operands (E4M3 windows, wide floats, NaN, Inf, signed zeros); exp2f on every path against libm;
// and ATTNUM_ISA / `attnum version --json` through the binary. Paths the machine lacks are
// skipped with a message.
#include "attnum/attention/isa.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <sys/wait.h>
#include <tuple>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "attention/oracle_check.h"
#include "attention/test_util.h"
#include "attnum/attention/engine.h"
#include "attnum/attention/fast_exp2.h"
#include "attnum/attention/fma_gemm.h"
#include "attnum/attention/kernel_spec.h"
#include "attnum/attention/plane_gemm.h"
#include "attnum/core/error.h"
#include "attnum/core/parallel.h"
#include "oracles/accumulator_oracle.h"
#include "attnum/formats/format.h"
#include "attnum/formats/scale.h"

namespace attnum::attention {
namespace {

using isa::path;

const std::vector<path>& kAll = isa::all_paths();

// The x86 paths have the double-FMA chunk kernels (fma_gemm.h); scalar and neon have none.
bool fma_kernels(path p) { return p == path::avx2 || p == path::avx512 || p == path::amx; }

// Restores the process's ISA choice at scope exit.
struct isa_guard {
  path saved = isa::active();
  ~isa_guard() { isa::set_active(saved); }
};

// Runs f for every supported path; reports the ones this machine lacks.
template <typename F>
void for_each_path(F&& f) {
  isa_guard g;
  for (path p : kAll) {
    if (!isa::supported(p)) {
      std::printf("[ skipped  ] ISA path %s: not supported on this machine\n", std::string(isa::name(p)).c_str());
      continue;
    }
    isa::set_active(p);
    SCOPED_TRACE(std::string(isa::name(p)));
    f(p);
  }
}

TEST(isa, scalar_is_always_supported_and_unsupported_paths_are_refused) {
  EXPECT_TRUE(isa::supported(path::scalar));
  EXPECT_TRUE(isa::supported(isa::active()));
  isa_guard g;
  for (path p : kAll)
    if (!isa::supported(p)) {
      EXPECT_THROW(isa::set_active(p), attnum::error) << isa::name(p);
    }
}

TEST(isa, every_path_gives_the_scalar_bits_for_every_preset) {
  set_threads(2);
  for (const auto& name : preset_names()) {
    // (n, d, causal, wide): tails off every block grid, d not a multiple of 32, both masks
    for (auto [n, d, causal, wide] :
         {std::tuple{130, 64, true, false}, std::tuple{77, 80, false, true}, std::tuple{40, 128, true, true}}) {
      const auto L =
          wide ? test::wide_layer(4, 2, n, d, 31 + n + d) : test::random_layer(4, 2, n, n, d, 17 + n + d, 3.0f);
      std::vector<float> want;
      {
        isa_guard g;
        isa::set_active(path::scalar);
        want = run_layer(preset(name), L.view, condition::plain, causal);
      }
      for_each_path([&](path p) {
        if (p == path::scalar) return;
        const auto got = run_layer(preset(name), L.view, condition::plain, causal);
        std::ostringstream what;
        what << name << " on " << isa::name(p) << " n " << n << " d " << d << " causal " << causal << " wide " << wide;
        oracle_check::expect_same_bits(got, want, d, what.str());
      });
    }
  }
  set_threads(1);
}

TEST(isa, every_path_matches_the_preset_oracles) {
  set_threads(1);
  for_each_path([&](path) {
    uint64_t seed = 70;
    for (const auto& name : oracle_check::kOraclePresets)
      for (bool causal : {true, false}) {
        oracle_check::check_preset(name, 97, 64, true, causal, ++seed);
        // n_q < n_kv: the causal diagonal's alignment (top-left for Sage)
        if (causal) oracle_check::check_preset(name, 70, 64, true, true, ++seed, true, 150);
      }
  });
}

// Operands for the chunk GEMM: E4M3 grid values at the windows' extremes (exact-sum case), wide
// floats (ordered case: the bits depend on the order), and specials.
std::vector<float> operand(size_t n, uint64_t seed, int kind) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::uniform_int_distribution<int> pick(0, 99);
  std::vector<float> v(n);
  for (auto& x : v) {
    const int c = pick(rng);
    if (kind == 0)
      x = formats::quantize_e4m3_sat(c < 30 ? (c % 2 ? 448.0f : -0x1p-9f)
                                            : nd(rng) * std::exp2(static_cast<float>(c % 18 - 9)));
    else
      x = nd(rng) * std::exp2(static_cast<float>(c % 60 - 30));
    if (kind == 2 && c == 0) x = NAN;
    if (kind == 2 && c == 1) x = (rng() & 1) ? INFINITY : -INFINITY;
    if (kind == 2 && c == 2) x = -0.0f;
  }
  return v;
}

TEST(isa, fma_chunk_gemm_equals_the_plain_double_loop) {
  for_each_path([&](path p) {
    uint64_t seed = 5;
    for (int kind : {0, 1, 2})
      for (auto [rows, n, kn] : {std::tuple{64, 192, 32}, std::tuple{7, 13, 5}, std::tuple{13, 33, 16},
                                 std::tuple{1, 1, 1}, std::tuple{64, 128, 128}}) {
        const int lda = kn + 3, ldb = n + 5, ldc = n + 1;
        const auto A = operand(static_cast<size_t>(rows) * lda, ++seed, kind);
        const auto B = operand(static_cast<size_t>(kn) * ldb, ++seed, kind);
        std::vector<double> C(static_cast<size_t>(rows) * ldc, -3.0);
        const bool ran = fma::ordered_gemm(A.data(), lda, B.data(), ldb, rows, n, kn, C.data(), ldc);
        EXPECT_EQ(ran, fma_kernels(p));
        if (!ran) continue;
        for (int r = 0; r < rows; ++r)
          for (int j = 0; j < ldc; ++j) {
            double want = -3.0;  // columns past n are not written
            if (j < n) {
              want = 0.0;
              for (int k = 0; k < kn; ++k)
                want += static_cast<double>(A[static_cast<size_t>(r) * lda + k]) *
                        static_cast<double>(B[static_cast<size_t>(k) * ldb + j]);
            }
            const double got = C[static_cast<size_t>(r) * ldc + j];
            if (std::isnan(want) && std::isnan(got)) continue;
            ASSERT_EQ(std::bit_cast<uint64_t>(got), std::bit_cast<uint64_t>(want))
                << "kind " << kind << " rows " << rows << " n " << n << " kn " << kn << " at " << r << "," << j;
          }
      }
  });
}

// B packed once (K transposed for QK, V as is for PV): every chunk and column block from it equals
// the plain loop, and a block start off the panel grid is refused.
TEST(isa, packed_chunk_gemm_equals_the_plain_double_loop) {
  for_each_path([&](path p) {
    const int K = 70, N = 96, rows = 13, lda = K;
    for (bool transposed : {false, true}) {
      const auto A = operand(static_cast<size_t>(rows) * lda, 3, 1);
      const auto B = operand(static_cast<size_t>(K) * N, 4, 1);  // [K][N], or [N][K] when transposed
      fma::packed_b pb;
      pb.build(B.data(), transposed ? K : N, transposed, K, N);
      const int W = pb.W;
      EXPECT_EQ(W, fma::panel_width());
      std::vector<double> C(static_cast<size_t>(rows) * N);
      EXPECT_EQ(fma::ordered_gemm(A.data(), lda, pb, 0, 32, 0, N, rows, C.data(), N), fma_kernels(p));
      if (!fma_kernels(p)) continue;
      if (W > 1) {
        EXPECT_FALSE(fma::ordered_gemm(A.data(), lda, pb, 0, 32, 1, N - W, rows, C.data(), N));
      }
      for (auto [k0, kn, j0, n] : {std::tuple{0, 32, 0, N}, std::tuple{32, 32, W, N - W}, std::tuple{64, 6, 0, 5}}) {
        std::vector<double> got(static_cast<size_t>(rows) * n);
        ASSERT_TRUE(fma::ordered_gemm(A.data() + k0, lda, pb, k0, kn, j0, n, rows, got.data(), n));
        for (int r = 0; r < rows; ++r)
          for (int j = 0; j < n; ++j) {
            double want = 0.0;
            for (int k = k0; k < k0 + kn; ++k)
              want += static_cast<double>(A[static_cast<size_t>(r) * lda + k]) *
                      static_cast<double>(transposed ? B[static_cast<size_t>(j0 + j) * K + k]
                                                     : B[static_cast<size_t>(k) * N + j0 + j]);
            ASSERT_EQ(std::bit_cast<uint64_t>(got[static_cast<size_t>(r) * n + j]), std::bit_cast<uint64_t>(want))
                << "transposed " << transposed << " k0 " << k0 << " j0 " << j0 << " at " << r << "," << j;
          }
      }
    }
  });
}

// Q packed once as doubles (packed_a) and the fp32 accumulator rounding fused into the kernels'
// epilogue (fp32_acc): against the plain ascending loop and float(acc + sum) written out here, in
// float and double storage, from +0 and from a prior value, with dead rows left alone, whole and
// partial panels, NaN / Inf / -0 operands; and the refusals.
TEST(isa, fused_fp32_rounding_equals_the_plain_loop_then_rounding) {
  for_each_path([&](path p) {
    const int K = 70, N = 96, R = 20;
    const auto A = operand(static_cast<size_t>(R) * K, 11, 2);
    const auto B = operand(static_cast<size_t>(N) * K, 12, 2);  // K^T layout: [N][K]
    fma::packed_b pb;
    pb.build(B.data(), K, true, K, N);
    fma::packed_a pa;
    pa.build(A.data(), K, R, K);
    ASSERT_EQ(pa.p.size(), static_cast<size_t>(R) * K);
    EXPECT_EQ(std::bit_cast<uint64_t>(pa.p[5]), std::bit_cast<uint64_t>(static_cast<double>(A[5])));
    const int W = pb.W;
    std::vector<char> live(R, 1);
    live[2] = live[9] = 0;
    for (auto [r0, rows, k0, kn, j0, n] :
         {std::tuple{0, 13, 0, 32, 0, N}, std::tuple{7, 13, 32, 32, W, N - W}, std::tuple{3, 6, 64, 6, 0, 5}}) {
      for (int storage : {0, 1})
        for (bool from_zero : {false, true})
          for (bool with_live : {false, true})
            for (bool use_pa : {false, true}) {
              const int ld = n + 3;
              std::vector<float> f(static_cast<size_t>(rows) * ld);
              std::vector<double> dd(f.size());
              for (size_t i = 0; i < f.size(); ++i) {
                f[i] = static_cast<float>(i % 7) * 0.37f - 1.0f;
                dd[i] = f[i];
              }
              const auto f0 = f;
              const fma::fp32_acc out{storage == 0 ? f.data() : nullptr, storage == 1 ? dd.data() : nullptr, ld,
                                      from_zero, with_live ? live.data() + r0 : nullptr};
              const bool ran = use_pa ? fma::ordered_gemm(pa, r0, pb, k0, kn, j0, n, rows, out)
                                      : fma::ordered_gemm(A.data() + static_cast<size_t>(r0) * K + k0, K, pb, k0, kn,
                                                          j0, n, rows, out);
              EXPECT_EQ(ran, fma_kernels(p));
              if (!ran) continue;
              for (int r = 0; r < rows; ++r)
                for (int j = 0; j < ld; ++j) {
                  const size_t i = static_cast<size_t>(r) * ld + j;
                  float want = f0[i];  // columns past n and dead rows are not written
                  if (j < n && (!with_live || live[r0 + r])) {
                    double sum = 0.0;
                    for (int k = k0; k < k0 + kn; ++k)
                      sum += static_cast<double>(A[static_cast<size_t>(r0 + r) * K + k]) *
                             static_cast<double>(B[static_cast<size_t>(j0 + j) * K + k]);
                    want = static_cast<float>((from_zero ? 0.0 : static_cast<double>(f0[i])) + sum);
                  }
                  const float got = storage == 0 ? f[i] : static_cast<float>(dd[i]);
                  if (storage == 1) {
                    ASSERT_EQ(std::bit_cast<uint64_t>(dd[i]), std::bit_cast<uint64_t>(static_cast<double>(got)))
                        << "double storage holds an fp32 value";
                  }
                  if (std::isnan(want) && std::isnan(got)) continue;
                  ASSERT_EQ(std::bit_cast<uint32_t>(got), std::bit_cast<uint32_t>(want))
                      << "storage " << storage << " from_zero " << from_zero << " live " << with_live << " packed A "
                      << use_pa << " r0 " << r0 << " k0 " << k0 << " j0 " << j0 << " at " << r << "," << j;
                }
            }
    }
    if (!fma_kernels(p)) return;
    std::vector<float> f(static_cast<size_t>(R) * N);
    std::vector<double> dd(f.size());
    EXPECT_FALSE(fma::ordered_gemm(pa, 0, pb, 0, 32, 0, N, R, fma::fp32_acc{f.data(), dd.data(), N}));  // both
    EXPECT_FALSE(fma::ordered_gemm(pa, 0, pb, 0, 32, 0, N, R, fma::fp32_acc{nullptr, nullptr, N}));     // neither
    EXPECT_FALSE(fma::ordered_gemm(pa, 8, pb, 0, 32, 0, N, 13, fma::fp32_acc{f.data(), nullptr, N}));   // past A's rows
    EXPECT_FALSE(fma::ordered_gemm(pa, 0, pb, 64, 8, 0, N, R, dd.data(), N));                           // past A's k
    if (W > 1) {
      EXPECT_FALSE(fma::ordered_gemm(pa, 0, pb, 0, 32, 1, N - W, R, fma::fp32_acc{f.data(), nullptr, N}));
    }
  });
}

// The kernel's PV MMA covers the whole KV block: a V that casts to Inf (bf16 rounds FLT_MAX up)
// at key 12 meets P = 0 in every query row before it (causal), and 0 * Inf is NaN there. No path
// may drop those products as zeros (the chunk trimming and the per-row limits of the fused fp32
// kernels stand down when V is not finite).
TEST(isa, infinite_v_reaches_masked_rows_as_nan) {
  ASSERT_TRUE(std::isinf(formats::quantize_bf16(3.4e38f)));
  const int n = 16, d = 64, key = 12, ch = 3;
  auto L = test::random_layer(1, 1, n, n, d, 41);
  L.v[static_cast<size_t>(key) * d + ch] = 3.4e38f;
  for_each_path([&](path p) {
    const auto o = run_layer(preset("bf16"), L.view, condition::plain, true);
    for (int r = 0; r < key; ++r)
      EXPECT_TRUE(std::isnan(o[static_cast<size_t>(r) * d + ch])) << isa::name(p) << " row " << r;
    for (int r = key; r < n; ++r)
      EXPECT_TRUE(std::isinf(o[static_cast<size_t>(r) * d + ch])) << isa::name(p) << " row " << r;
    EXPECT_TRUE(std::isfinite(o[ch + 1]));
  });
}

// One call over several chunks (fp32_acc::k_step) against the plain loop that sums each chunk in
// double from +0 and rounds it into the accumulator in turn; with the causal skip (mask_after:
// micro-tiles wholly above the diagonal keep what they held, everything else is computed) and the
// trailing-zero limits (k_end: A is +-0 from k_end[r] on in row r).
TEST(isa, multi_chunk_fp32_rounding_equals_one_rounding_per_chunk) {
  for_each_path([&](path p) {
    const int K = 100, N = 70, R = 23;  // chunks of 32 leave a short last one; N not a panel multiple
    const auto B = operand(static_cast<size_t>(K) * N, 22, 1);  // [K][N]: V's layout
    fma::packed_b pb;
    pb.build(B.data(), N, false, K, N);
    std::vector<int> k_end(R);
    for (int order : {0, 1, 2}) {
      // trailing +-0 of every length from 0 to K, rising, falling or shuffled over the rows (so
      // that the longest row of a micro-tile is its first, its last or any)
      auto A = operand(static_cast<size_t>(R) * K, 21, 1);
      std::mt19937_64 rng(5);
      for (int r = 0; r < R; ++r) {
        const int up = (r * K) / (R - 1);
        k_end[r] = order == 0 ? up : order == 1 ? K - up : static_cast<int>(rng() % (K + 1));
        for (int k = k_end[r]; k < K; ++k) A[static_cast<size_t>(r) * K + k] = (k % 3) ? 0.0f : -0.0f;
      }
      std::vector<char> live(R, 1);
      live[4] = live[17] = 0;
      for (int ks : {32, 7, 0})
        for (long mask_after : {kNoMask, 0L, -9L, 3L, 10L})  // 3, 10: a panel starts on a diagonal
          for (bool use_end : {false, true})
            for (bool from_zero : {false, true}) {
              if (use_end && from_zero) continue;  // refused below
              std::vector<float> f(static_cast<size_t>(R) * N);
              for (size_t i = 0; i < f.size(); ++i) f[i] = static_cast<float>(i % 11) * 0.25f - 1.0f;
              const auto f0 = f;
              std::vector<int> ends(R);
              for (int r = 0; r < R; ++r) ends[r] = live[r] ? k_end[r] : 0;
              fma::fp32_acc out{f.data(), nullptr, N, from_zero, live.data(), ks};
              out.mask_after = mask_after;
              if (use_end) out.k_end = ends.data();
              const bool ran = fma::ordered_gemm(A.data(), K, pb, 0, K, 0, N, R, out);
              EXPECT_EQ(ran, fma_kernels(p));
              if (!ran) continue;
              int skipped = 0;
              for (int r = 0; r < R; ++r) {
                for (int j = 0; j < N; ++j) {
                  const size_t i = static_cast<size_t>(r) * N + j;
                  float want = f0[i];
                  if (live[r]) {
                    const int step = ks > 0 ? ks : K;
                    for (int c0 = 0; c0 < K; c0 += step) {
                      double sum = 0.0;
                      for (int k = c0; k < std::min(K, c0 + step); ++k)
                        sum += static_cast<double>(A[static_cast<size_t>(r) * K + k]) *
                               static_cast<double>(B[static_cast<size_t>(k) * N + j]);
                      want = static_cast<float>((from_zero && c0 == 0 ? 0.0 : static_cast<double>(want)) + sum);
                    }
                  }
                  // a masked entry (j > r + mask_after) is computed or left as it was, nothing else
                  if (j > r + mask_after && f[i] == f0[i] &&
                      std::bit_cast<uint32_t>(f[i]) != std::bit_cast<uint32_t>(want)) {
                    ++skipped;
                    continue;
                  }
                  ASSERT_EQ(std::bit_cast<uint32_t>(f[i]), std::bit_cast<uint32_t>(want))
                      << isa::name(p) << " k_step " << ks << " mask_after " << mask_after << " k_end " << use_end
                      << " from_zero " << from_zero << " order " << order << " at " << r << "," << j;
                }
              }
              if (mask_after < N) {
                EXPECT_GT(skipped, 0) << "the causal skip never applied";
              }
            }
    }
    if (!fma_kernels(p)) return;
    const auto A = operand(static_cast<size_t>(R) * K, 21, 1);
    std::vector<float> f(static_cast<size_t>(R) * N);
    fma::fp32_acc bad{f.data(), nullptr, N, true, nullptr, 32};
    bad.k_end = k_end.data();  // a skipped chunk cannot both leave acc and start it from +0
    EXPECT_FALSE(fma::ordered_gemm(A.data(), K, pb, 0, K, 0, N, R, bad));
    bad.from_zero = false, bad.k_step = -1;
    EXPECT_FALSE(fma::ordered_gemm(A.data(), K, pb, 0, K, 0, N, R, bad));
  });
}

// INT8 QK: exact integer sums against a plain int64 loop, the extremes -128 and 127 included, d
// odd and not a multiple of the vector width.
TEST(isa, int8_gemm_equals_the_integer_loop) {
  for_each_path([&](path p) {
    std::mt19937_64 rng(21);
    std::uniform_int_distribution<int> u(-128, 127), pick(0, 3);
    for (auto [rows, n, d] :
         {std::tuple{64, 192, 128}, std::tuple{9, 37, 7}, std::tuple{17, 33, 200}, std::tuple{1, 1, 1}}) {
      std::vector<float> q(static_cast<size_t>(rows) * d), k(static_cast<size_t>(n) * d);
      for (auto* v : {&q, &k})
        for (auto& x : *v) x = static_cast<float>(pick(rng) == 0 ? (rng() & 1 ? 127 : -128) : u(rng));
      const int ldc = n + 2;
      // K packed once: every key block on the panel grid equals the integer loop too
      fma::packed_i8_b kp;
      kp.build(k.data(), d, n, d);
      EXPECT_EQ(kp.W > 0, p != path::scalar);
      for (int j0 = 0; kp.W > 0 && j0 < n; j0 += kp.W) {
        const int nn = std::min(n - j0, 2 * kp.W);
        std::vector<double> Cp(static_cast<size_t>(rows) * nn);
        ASSERT_TRUE(fma::int8_gemm_nt(q.data(), d, kp, j0, rows, nn, Cp.data(), nn));
        for (int r = 0; r < rows; ++r)
          for (int j = 0; j < nn; ++j)
            ASSERT_EQ(Cp[static_cast<size_t>(r) * nn + j], test::int8_dot(q, r, k, j0 + j, d))
                << "packed j0 " << j0 << " at " << r << "," << j;
      }
      // Q packed once too: rows [r0, r0 + rr) of it against each key block
      fma::packed_i8_a qp;
      qp.build(q.data(), d, rows, d);
      EXPECT_EQ(qp.W, kp.W);
      const int r0 = rows / 3, rr = rows - r0;
      for (int j0 = 0; kp.W > 0 && j0 < n; j0 += kp.W) {
        const int nn = std::min(n - j0, kp.W + 3);
        std::vector<double> Cq(static_cast<size_t>(rr) * nn);
        ASSERT_TRUE(fma::int8_gemm_nt(qp, r0, rr, kp, j0, nn, Cq.data(), nn));
        for (int r = 0; r < rr; ++r)
          for (int j = 0; j < nn; ++j)
            ASSERT_EQ(Cq[static_cast<size_t>(r) * nn + j], test::int8_dot(q, r0 + r, k, j0 + j, d))
                << "packed Q, j0 " << j0;
      }
      if (kp.W > 1) {
        std::vector<double> Cx(4);
        EXPECT_FALSE(fma::int8_gemm_nt(q.data(), d, kp, 1, 1, 1, Cx.data(), 1));  // off the panel grid
        EXPECT_FALSE(fma::int8_gemm_nt(qp, rows, 1, kp, 0, 1, Cx.data(), 1));     // past Q's rows
        fma::packed_i8_a other;
        const std::vector<float> q2(static_cast<size_t>(d) + 1, 1.0f);
        other.build(q2.data(), d + 1, 1, d + 1);
        EXPECT_FALSE(fma::int8_gemm_nt(other, 0, 1, kp, 0, 1, Cx.data(), 1));  // another d
      }
      std::vector<double> C(static_cast<size_t>(rows) * ldc, -1.0);
      const bool ran = fma::int8_gemm_nt(q.data(), d, k.data(), d, rows, n, d, C.data(), ldc);
      EXPECT_EQ(ran, p != path::scalar);
      if (!ran) continue;
      for (int r = 0; r < rows; ++r)
        for (int j = 0; j < ldc; ++j)
          ASSERT_EQ(C[static_cast<size_t>(r) * ldc + j], j < n ? test::int8_dot(q, r, k, j, d) : -1.0)
              << "rows " << rows << " n " << n << " d " << d << " at " << r << "," << j;
    }
  });
}

// E4M3 operands for the plane kernels: kind 0 per-tensor scaled normals (max 448: sparse low
// planes), 1 a small range (max below 16: one plane), 2 log-normal magnitudes (dense low planes:
// refused), 3 kind 0 with one NaN (refused).
std::vector<float> e4m3_operand(size_t n, uint64_t seed, int kind) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = kind == 2 ? nd(rng) * std::exp(2.5f * nd(rng)) : nd(rng);
  float m = 0.0f;
  for (float x : v) m = std::max(m, std::fabs(x));
  const float to = kind == 1 ? 12.0f : 448.0f;
  for (auto& x : v) x = formats::quantize_e4m3_sat(x * (to / m));
  if (kind == 0 && n > 3) v[1] = -0x1p-9f, v[2] = 0x1.8p-7f, v[3] = -0.0f;  // the grid's low end, a signed zero
  if (kind == 3) v[n / 2] = NAN;
  return v;
}

// The exact chunk sum of E4M3 products: the ascending double sum (exact, see fma_gemm.h).
double exact_dot(const float* a, size_t sa, const float* b, size_t sb, int n) {
  double s = 0.0;
  for (int t = 0; t < n; ++t) s += static_cast<double>(a[t * sa]) * static_cast<double>(b[t * sb]);
  return s;
}

// Q and K as E4M3 operands (e4m3_operand kinds) split into their QK planes with the shifts
// choose_shifts gives them (the builds' ok flags as they come).
struct qk_planes {
  std::vector<float> Q, K;
  planes::plane_a qa;
  planes::plane_b kb;
};
qk_planes make_qk_planes(int n_q, int n_kv, int d, uint64_t seed_q, uint64_t seed_k, int kind_q, int kind_k) {
  qk_planes t;
  t.Q = e4m3_operand(static_cast<size_t>(n_q) * d, seed_q, kind_q);
  t.K = e4m3_operand(static_cast<size_t>(n_kv) * d, seed_k, kind_k);
  int sa = 0, sb = 0;
  EXPECT_TRUE(planes::choose_shifts(formats::span_amax(t.Q.data(), t.Q.size()),
                                    formats::span_amax(t.K.data(), t.K.size()), 32, sa, sb));
  t.qa.build(t.Q.data(), d, n_q, d, sa);
  t.kb.build(t.K.data(), d, true, d, n_kv, sb);
  return t;
}

TEST(isa, plane_chunk_sums_equal_the_exact_sums) {
  for_each_path([&](path p) {
    const int W = planes::panel_width();
    EXPECT_EQ(W > 0, p != path::scalar);
    if (W == 0) return;
    for (int kind : {0, 1, 2, 3}) {
      // QK: Q [n_q][d], K [n_kv][d]; d = 78: a last chunk of 14
      const int n_q = 70, n_kv = 3 * W + 5, d = 78;
      const auto t = make_qk_planes(n_q, n_kv, d, 100 + kind, 200 + kind, kind, kind == 3 ? 0 : kind);
      const auto& [Q, K, qa, kb] = t;
      EXPECT_EQ(qa.ok, kind < 2) << "kind " << kind;  // dense low planes and NaN are refused
      if (kind >= 2) {
        std::vector<double> C(4);
        EXPECT_FALSE(planes::qk_chunk(qa, kb, 0, 1, 0, 32, 0, 4, C.data(), 4));
        continue;
      }
      ASSERT_TRUE(kb.ok);
      {  // the amax a caller passes (the engine's) builds the same planes as the one computed here
        planes::plane_a qa2;
        planes::plane_b kb2;
        qa2.build(Q.data(), d, n_q, d, qa.shift, formats::span_amax(Q.data(), Q.size()));
        kb2.build(K.data(), d, true, d, n_kv, kb.shift, formats::span_amax(K.data(), K.size()));
        EXPECT_EQ(qa2.max_int, qa.max_int);
        EXPECT_EQ(kb2.max_int, kb.max_int);
        EXPECT_EQ(qa2.hi, qa.hi);
        EXPECT_EQ(kb2.p, kb.p);
      }
      if (kind == 0) {
        EXPECT_GT(qa.lo_k.size(), 0u);
        EXPECT_GT(kb.lo_j.size(), 0u);
      }
      planes::stats() = {};
      for (auto [r0, rows, k0, kn, j0, n] : {std::tuple{0, 64, 0, 32, 0, n_kv}, std::tuple{5, 13, 32, 32, W, 2 * W + 3},
                                             std::tuple{64, 6, 64, 14, 2 * W, 7}, std::tuple{1, 1, 0, 2, 0, 1}}) {
        std::vector<double> C(static_cast<size_t>(rows) * n, -7.0);
        ASSERT_TRUE(planes::qk_chunk(qa, kb, r0, rows, k0, kn, j0, n, C.data(), n));
        for (int r = 0; r < rows; ++r)
          for (int j = 0; j < n; ++j) {
            const double want = exact_dot(Q.data() + static_cast<size_t>(r0 + r) * d + k0, 1,
                                          K.data() + static_cast<size_t>(j0 + j) * d + k0, 1, kn);
            ASSERT_EQ(std::bit_cast<uint64_t>(C[static_cast<size_t>(r) * n + j]), std::bit_cast<uint64_t>(want))
                << "kind " << kind << " r0 " << r0 << " k0 " << k0 << " j0 " << j0 << " at " << r << "," << j;
          }
      }
      std::vector<double> C(64);
      EXPECT_FALSE(planes::qk_chunk(qa, kb, 0, 1, 1, 32, 0, 4, C.data(), 4));  // odd k0
      EXPECT_FALSE(planes::qk_chunk(qa, kb, 0, 1, 0, 33, 0, 4, C.data(), 4));  // chunk above 32
      EXPECT_FALSE(planes::qk_chunk(qa, kb, 0, 1, 0, 32, 1, 4, C.data(), 4));  // block off the panel grid
      EXPECT_FALSE(planes::qk_chunk(qa, kb, 0, 1, 0, 15, 0, 4, C.data(), 4));  // odd chunk inside k
      if (kind == 0) {
        EXPECT_GT(planes::stats().a_lo_terms, 0);
        EXPECT_GT(planes::stats().b_lo_terms, 0);
      }
    }
    // PV: P8 [rows][32] (E4M3 >= 0, many tiny values so the second plane runs), V [n_kv][d]
    const int n_kv = 75, d = 40, rows = 19;
    for (int kind : {0, 1}) {
      const auto V = e4m3_operand(static_cast<size_t>(n_kv) * d, 300 + kind, kind);
      planes::plane_b vb;
      vb.build(V.data(), d, false, n_kv, d, planes::shift_for(formats::span_amax(V.data(), V.size()), 13));
      ASSERT_TRUE(vb.ok);
      std::mt19937_64 rng(9 + kind);
      std::uniform_real_distribution<float> u(-24.0f, 8.0f);
      const int ldp = 40;
      std::vector<float> P(static_cast<size_t>(rows) * ldp);
      for (auto& x : P) x = formats::quantize_e4m3_sat(std::exp2(u(rng)));
      std::vector<char> live(rows, 1);
      live[4] = 0;
      P[4 * ldp + 3] = NAN;  // a dead row's NaN is not read
      planes::stats() = {};
      for (auto [k0, kn] : {std::tuple{0, 32}, std::tuple{32, 32}, std::tuple{64, 11}}) {
        std::vector<double> C(static_cast<size_t>(rows) * d);
        ASSERT_TRUE(planes::pv_chunk(P.data(), ldp, live.data(), rows, k0, kn, vb, C.data(), d)) << k0;
        for (int r = 0; r < rows; ++r) {
          if (!live[r]) continue;
          for (int j = 0; j < d; ++j) {
            const double want = exact_dot(P.data() + static_cast<size_t>(r) * ldp, 1,
                                          V.data() + static_cast<size_t>(k0) * d + j, d, kn);
            ASSERT_EQ(std::bit_cast<uint64_t>(C[static_cast<size_t>(r) * d + j]), std::bit_cast<uint64_t>(want))
                << "kind " << kind << " k0 " << k0 << " at " << r << "," << j;
          }
        }
      }
      EXPECT_GT(planes::stats().pv_lo_passes, 0);
      if (kind == 0) {
        EXPECT_GT(planes::stats().b_lo_terms, 0);
      }
      {
        // P's shift is chosen per group of 8 rows: rows 8-15 all below 16 take every value into
        // the hi plane at shift 9 and skip the second pass that groups 0 and 2 (values up to 256
        // beside tiny ones) still run; the sums stay exact
        std::vector<float> P2 = P;
        std::uniform_real_distribution<float> small(-24.0f, 3.9f);
        for (int r = 8; r < 16; ++r)
          for (int t = 0; t < 32; ++t)
            P2[static_cast<size_t>(r) * ldp + t] = formats::quantize_e4m3_sat(std::exp2(small(rng)));
        P2[9 * ldp + 7] = 15.0f;
        planes::stats() = {};
        std::vector<double> C(static_cast<size_t>(rows) * d);
        ASSERT_TRUE(planes::pv_chunk(P2.data(), ldp, live.data(), rows, 0, 32, vb, C.data(), d));
        EXPECT_EQ(planes::stats().pv_lo_passes, 2);
        for (int r = 0; r < rows; ++r)
          for (int j = 0; live[r] && j < d; ++j)
            ASSERT_EQ(
                std::bit_cast<uint64_t>(C[static_cast<size_t>(r) * d + j]),
                std::bit_cast<uint64_t>(exact_dot(P2.data() + static_cast<size_t>(r) * ldp, 1, V.data() + j, d, 32)))
                << "mixed shifts, kind " << kind << " at " << r << "," << j;
      }
      std::vector<double> C(static_cast<size_t>(rows) * d);
      P[2 * ldp + 5] = NAN;  // a live NaN refuses the chunk
      EXPECT_FALSE(planes::pv_chunk(P.data(), ldp, live.data(), rows, 0, 32, vb, C.data(), d));
      P[2 * ldp + 5] = 0.3f;  // off the E4M3 grid
      EXPECT_FALSE(planes::pv_chunk(P.data(), ldp, live.data(), rows, 0, 32, vb, C.data(), d));
    }
  });
}

// The causal skip of qk_chunk (each group of rows writes and sinks the columns that hold its
// unmasked scores, exact, and leaves the rest) and pv_chunk's stop at a group's last nonzero P (the
// sums stay exact with zero tails of every length, odd ones and whole rows included).
TEST(isa, plane_chunks_skip_masked_columns_and_zero_tails) {
  for_each_path([&](path p) {
    const int W = planes::panel_width();
    if (W == 0) return;
    (void)p;
    const int n_q = 40, n_kv = 3 * W + 5, d = 64;
    const auto t = make_qk_planes(n_q, n_kv, d, 111, 222, 0, 0);
    const auto& [Q, K, qa, kb] = t;
    ASSERT_TRUE(qa.ok && kb.ok);
    for (long mask_after : {kNoMask, 0L, 3L, -5L, static_cast<long>(W) - 8}) {
      const int rows = n_q, n = n_kv;
      std::vector<double> C(static_cast<size_t>(rows) * n, -7.0);
      std::vector<int> seen(rows, -1);  // the columns each row's sink was given
      auto sink = [&](int g, int nr, const double*, int, int nc) {
        for (int r = g; r < g + nr; ++r) seen[r] = nc;
      };
      ASSERT_TRUE(planes::qk_chunk(qa, kb, 0, rows, 32, 32, 0, n, C.data(), n, planes::make_sink(sink), mask_after));
      bool skipped = false;
      for (int r = 0; r < rows; ++r) {
        const long need = std::clamp(r + 1 + mask_after, 0L, static_cast<long>(n));  // unmasked: j <= r + mask_after
        ASSERT_GE(seen[r], need) << "mask_after " << mask_after << " row " << r;
        ASSERT_LE(seen[r], n);
        skipped |= seen[r] < n;
        for (int j = 0; j < n; ++j) {
          const double got = C[static_cast<size_t>(r) * n + j];
          if (j >= seen[r]) {
            ASSERT_EQ(got, -7.0) << "a column past the group's range was written";
            continue;
          }
          const double want = exact_dot(Q.data() + static_cast<size_t>(r) * d + 32, 1,
                                        K.data() + static_cast<size_t>(j) * d + 32, 1, 32);
          ASSERT_EQ(std::bit_cast<uint64_t>(got), std::bit_cast<uint64_t>(want))
              << "mask_after " << mask_after << " at " << r << "," << j;
        }
      }
      EXPECT_EQ(skipped, mask_after != kNoMask) << mask_after;
    }
    // PV with zero tails
    const int kv = 64, dv = 40, rows = 21, ldp = 36;
    const auto V = e4m3_operand(static_cast<size_t>(kv) * dv, 333, 0);
    planes::plane_b vb;
    vb.build(V.data(), dv, false, kv, dv, planes::shift_for(formats::span_amax(V.data(), V.size()), 13));
    ASSERT_TRUE(vb.ok);
    std::mt19937_64 rng(17);
    std::uniform_real_distribution<float> u(-24.0f, 8.0f);
    std::vector<float> P(static_cast<size_t>(rows) * ldp);
    for (auto& x : P) x = formats::quantize_e4m3_sat(std::exp2(u(rng)));
    for (int r = 0; r < rows; ++r) {  // row r is zero from (r * 3) % 33 on: 0 (all zero) to 32, odd ends too
      const int e = (r * 3) % 33;
      for (int t = e; t < 32; ++t) P[static_cast<size_t>(r) * ldp + t] = (t % 2) ? 0.0f : -0.0f;
    }
    std::vector<char> live(rows, 1);
    live[7] = 0;
    P[7 * ldp + 31] = 5.0f;  // a dead row's late value does not count
    std::vector<double> C(static_cast<size_t>(rows) * dv, -7.0);
    ASSERT_TRUE(planes::pv_chunk(P.data(), ldp, live.data(), rows, 0, 32, vb, C.data(), dv));
    for (int r = 0; r < rows; ++r)
      for (int j = 0; live[r] && j < dv; ++j)
        ASSERT_EQ(std::bit_cast<uint64_t>(C[static_cast<size_t>(r) * dv + j]),
                  std::bit_cast<uint64_t>(exact_dot(P.data() + static_cast<size_t>(r) * ldp, 1, V.data() + j, dv, 32)))
            << "zero tails at " << r << "," << j;
  });
}

// The engine on the plane kernels: per-tensor scaled FA3 operands take them (sparse low planes,
// both correction kinds, the second P plane), and the output has the scalar path's bits.
TEST(isa, fa3_runs_on_the_planes_with_the_scalar_bits) {
  set_threads(1);
  const auto L = test::random_layer(2, 1, 300, 300, 128, 77);
  std::vector<float> want;
  {
    isa_guard g;
    isa::set_active(path::scalar);
    want = run_layer(preset("fa3"), L.view, condition::plain, true);
  }
  for_each_path([&](path p) {
    if (p == path::scalar || p == path::amx) return;  // AMX has its tiles
    planes::stats() = {};
    const auto got = run_layer(preset("fa3"), L.view, condition::plain, true);
    oracle_check::expect_same_bits(got, want, 128, std::string("fa3 planes on ") + std::string(isa::name(p)));
    const auto& st = planes::stats();
    EXPECT_GT(st.qk_chunks, 0);
    EXPECT_GT(st.pv_chunks, 0);
    EXPECT_GT(st.a_lo_terms, 0);
    EXPECT_GT(st.b_lo_terms, 0);
    EXPECT_GT(st.pv_lo_passes, 0);
  });
}

// Which vector kernels ran (isa::count_dispatches): the scalar path enters none, every preset
// included, and another path enters only kernels its unit runs; on each vector path the engine's
// row kernels (row_kernels.h: max fold, wgmma row sums, the fp16 accumulator's round-and-add),
// exp2f and the chunk kernels are entered, so ATTNUM_ISA steers all of them.
TEST(isa, scalar_path_enters_no_vector_kernel_and_each_path_only_its_own) {
  set_threads(2);
  const auto L = test::random_layer(2, 1, 150, 150, 64, 91, 3.0f);
  bool fp16_acc = false;
  for (const auto& name : preset_names())
    fp16_acc = fp16_acc || preset(name).pv_acc.kind == acc_kind::fp16 || preset(name).qk_acc.kind == acc_kind::fp16;
  ASSERT_TRUE(fp16_acc) << "no preset has an fp16 accumulator: the round_add_fp16 check below needs one";
  for_each_path([&](path p) {
    std::set<std::string> entered;
    for (const auto& name : preset_names()) {
      isa::count_dispatches(true);
      (void)run_layer(preset(name), L.view, condition::plain, true);
      const auto counts = isa::dispatches();
      isa::count_dispatches(false);
      for (const auto& [key, calls] : counts) {
        const auto& [kernel, q] = key;
        EXPECT_TRUE(isa::at_least(q)) << name << ": kernel " << kernel << " of path " << isa::name(q) << " ran "
                                      << calls << " times on path " << isa::name(p);
        entered.insert(kernel);
      }
    }
    if (p == path::scalar) {
      EXPECT_TRUE(entered.empty()) << "the scalar path entered " << entered.size() << " vector kernels, e.g. "
                                   << (entered.empty() ? "" : *entered.begin());
      return;
    }
    std::vector<std::string> want = {"exp2f", "plane_gemm", "plane_split"};
    if (p != path::neon) want.insert(want.end(), {"fold_max", "wgmma_rowsum", "round_add_fp16", "fma_gemm"});
    if (p == path::amx) want.push_back("amx");
    for (const auto& k : want) EXPECT_TRUE(entered.count(k)) << "kernel " << k << " never ran on " << isa::name(p);
  });
  // with counting off nothing more is recorded
  const auto before = isa::dispatches();
  (void)run_layer(preset("fa3"), L.view, condition::plain, true);
  EXPECT_EQ(isa::dispatches(), before);
  set_threads(1);
}

// Which chunk-sum kind each head runs (chunk_sums.h, reported in run_stats): the kinds that need
// exact chunk sums (AMX tiles, int16 planes, Eigen's GEMM, the INT8 kernels) only where every
// product and chunk sum is exact, the ordered presets on the ascending double sums, no vector kind
// on the scalar path, and FA3's FP8 and Sage's INT8 heads on the kernels `attnum version` names
// for this path (isa::fp8_sums, isa::int8_sums).
TEST(isa, each_head_runs_the_chunk_sums_its_path_and_operands_allow) {
  set_threads(2);
  const auto L = test::random_layer(2, 1, 150, 150, 64, 93, 3.0f);
  // version's names -> the kinds they stand for
  auto fp8_kind = [](std::string_view v) {
    if (v == "amx-bf16") return std::string("amx_bf16");
    if (v.starts_with("int16-planes")) return std::string("int16_planes");
    if (v.starts_with("double-fma")) return std::string("double_fma");
    return std::string(v == "double-gemm" ? "eigen_double" : "unknown fp8_sums name");
  };
  auto int8_kind = [](std::string_view v) {
    if (v == "amx-int8") return std::string("amx_int8");
    if (v.starts_with("vpmaddwd") || v == "smlal-neon") return std::string("int8_vpmaddwd");
    return std::string(v == "fp32-gemm" ? "int8_fp32_gemm" : "unknown int8_sums name");
  };
  for_each_path([&](path p) {
    for (const auto& name : preset_names()) {
      SCOPED_TRACE(name);
      const kernel_spec& s = preset(name);
      const auto P = prepare_layer(s, L.view, condition::plain);
      std::vector<float> o(static_cast<size_t>(2) * 150 * 64);
      run_stats st[2];
      run_heads(*P, 0, 2, true, o.data(), st);
      const std::string qk(attention::name(st[0].qk)), pv(attention::name(st[0].pv));
      EXPECT_EQ(attention::name(st[1].qk), qk);  // one layer, one kind
      using formats::format;
      const bool e4 = s.enabled.q_cast && s.q.fmt == format::e4m3fn && s.enabled.k_cast && s.k.fmt == format::e4m3fn;
      const bool i8 = s.enabled.q_cast && s.q.fmt == format::int8 && s.enabled.k_cast && s.k.fmt == format::int8;
      const bool qk_exact = ((e4 && s.qk_acc.k_step <= 32) || i8) && s.scaling != score_scaling::dequant_unit;
      const bool pv_exact =
          s.enabled.v_cast && s.v.fmt == format::e4m3fn && s.p_fmt == format::e4m3fn && s.pv_acc.k_step <= 32;
      const std::set<std::string> ordered = {"double_fma", "ordered_loop"};
      EXPECT_TRUE(qk_exact || ordered.count(qk)) << "QK of an ordered preset on " << qk;
      EXPECT_TRUE(pv_exact || ordered.count(pv)) << "PV of an ordered preset on " << pv;
      if (!fma_kernels(p)) {
        EXPECT_NE(qk, "double_fma");
        EXPECT_NE(pv, "double_fma");
      }
      if (p == path::scalar) {
        EXPECT_TRUE(qk == "ordered_loop" || qk == "eigen_double" || qk == "int8_fp32_gemm") << qk;
        EXPECT_TRUE(pv == "ordered_loop" || pv == "eigen_double") << pv;
      }
      if (p != path::amx) {
        EXPECT_FALSE(qk.starts_with("amx")) << qk;
        EXPECT_FALSE(pv.starts_with("amx")) << pv;
      }
      if (name == "fa3") {
        EXPECT_EQ(qk, fp8_kind(isa::fp8_sums()));
        EXPECT_EQ(pv, fp8_kind(isa::fp8_sums()));
      }
      if (name == "sage2-sm90") {
        EXPECT_EQ(qk, int8_kind(isa::int8_sums()));
        EXPECT_EQ(pv, fp8_kind(isa::fp8_sums()));
      }
      if (name == "bf16" || name == "fp32") {
        EXPECT_EQ(qk, fma_kernels(p) ? "double_fma" : "ordered_loop");
        EXPECT_EQ(pv, fma_kernels(p) ? "double_fma" : "ordered_loop");
      }
    }
  });
  set_threads(1);
}

// The accumulator step against the formats layer's accumulator model (attnum::oracle::round_accumulator,
// its own implementation of fp16 / fp32 / truncated rounding): sums at fp16's overflow boundary
// (65504, 65520), in its subnormal range, at ties, and NaN / Inf / signed zeros.
TEST(isa, accumulate_chunk_equals_the_formats_accumulator_model) {
  std::mt19937_64 rng(17);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  std::vector<float> a0;
  std::vector<double> c;
  for (double edge : {65504.0, 65519.0, 65520.0, 65535.0, 0x1p-14, 0x1p-24, 0x1p-25, 1.0, 2048.0, 0.1}) {
    for (int s : {1, -1})
      for (int k = -3; k <= 3; ++k) {
        const double x = s * (edge + k * edge * 0x1p-12);
        a0.push_back(static_cast<float>(x * 0.5)), c.push_back(x - static_cast<float>(x * 0.5));
      }
  }
  for (int i = 0; i < 2000; ++i) {
    const double x = u(rng) * std::exp2(std::floor(u(rng) * 40.0));
    a0.push_back(formats::quantize_fp16(static_cast<float>(x))),
        c.push_back(u(rng) * std::exp2(std::floor(u(rng) * 40.0)));
  }
  a0.insert(a0.end(), {0.0f, -0.0f, 1.0f, INFINITY, -INFINITY, NAN, 3.0f, 0.0f});
  c.insert(c.end(), {-0.0, -0.0, NAN, 1.0, -1.0, 1.0, INFINITY, 65520.0});
  const struct {
    acc_kind k;
    attnum::oracle::accum_kind f;
    int bits;
  } kinds[] = {{acc_kind::fp16, attnum::oracle::accum_kind::fp16, 10},
               {acc_kind::fp32, attnum::oracle::accum_kind::fp32, 23},
               {acc_kind::truncated, attnum::oracle::accum_kind::truncated, 13}};
  for_each_path([&](path) {
    for (const auto& kd : kinds) {
      std::vector<float> a = a0;
      accumulate_chunk({kd.k, kd.bits, 32}, a.data(), c.data(),
                       static_cast<int>(a.size()) - 1);  // a partial last vector
      for (size_t i = 0; i + 1 < a.size(); ++i) {
        const float want = attnum::oracle::round_accumulator({kd.f, kd.bits, 32}, static_cast<double>(a0[i]) + c[i]);
        if (std::isnan(want) && std::isnan(a[i])) continue;
        ASSERT_EQ(std::bit_cast<uint32_t>(a[i]), std::bit_cast<uint32_t>(want))
            << "kind " << static_cast<int>(kd.k) << " a " << a0[i] << " c " << c[i];
      }
      EXPECT_EQ(std::bit_cast<uint32_t>(a.back()), std::bit_cast<uint32_t>(a0.back()));  // past n: untouched
    }
  });
}

TEST(isa, exp2f_every_path_matches_libm) {
  std::vector<float> x;
  for (float v = -140.0f; v < 130.0f; v += 0.00137f) x.push_back(v);
  x.insert(x.end(), {-INFINITY, INFINITY, NAN, -0.0f, 0.0f, 127.99999f, -126.0f, -149.5f, -150.0f, -150.00002f,
                     -149.99998f, -1e30f, -3.0e38f, -200.0f, -128.0f, -127.99999f, -1e30f, -1e30f, -160.0f});
  for_each_path([&](path p) {
    std::vector<float> y(x.size()), z(x.size());
    fast::exp2f_array(x.data(), y.data(), static_cast<int>(x.size()) - 3);  // a partial last group
    fast::exp2f_fma_array(x.data(), 0.75f, -1.5f, z.data(), static_cast<int>(x.size()));
    for (size_t i = 0; i + 3 < x.size(); ++i)
      ASSERT_EQ(std::bit_cast<uint32_t>(y[i]), std::bit_cast<uint32_t>(std::exp2f(x[i]))) << x[i];
    for (size_t i = 0; i < x.size(); ++i)
      ASSERT_EQ(std::bit_cast<uint32_t>(z[i]), std::bit_cast<uint32_t>(std::exp2f(std::fmaf(x[i], 0.75f, -1.5f))))
          << x[i];
    if (p != path::scalar) {
      EXPECT_EQ(std::string(fast::exp2f_path()), std::string(isa::name(p == path::amx ? path::avx512 : p)));
    }
  });
}

// The binary: ATTNUM_ISA picks the path `version --json` reports; a bad or missing one exits 2.
int run(const std::string& cmd, std::string* out = nullptr) {
  FILE* f = popen((cmd + " 2>&1").c_str(), "r");
  if (!f) return -1;
  char buf[512];
  std::string s;
  while (fgets(buf, sizeof buf, f)) s += buf;
  const int st = pclose(f);
  if (out) *out = s;
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

TEST(isa, attnum_isa_environment_variable) {
  const std::string bin = ATTNUM_BINARY;
  for (path p : kAll) {
    std::string out;
    const int rc = run("ATTNUM_ISA=" + std::string(isa::name(p)) + " " + bin + " version --json", &out);
    if (isa::supported(p)) {
      EXPECT_EQ(rc, 0) << out;
      EXPECT_NE(out.find("\"isa\":\"" + std::string(isa::name(p)) + "\""), std::string::npos) << out;
    } else {
      EXPECT_EQ(rc, 2) << out;
      EXPECT_NE(out.find("ATTNUM_ISA=" + std::string(isa::name(p))), std::string::npos) << out;
    }
  }
  std::string out;
  EXPECT_EQ(run("ATTNUM_ISA=sse9 " + bin + " version", &out), 2);
  EXPECT_NE(out.find("expected one of scalar, avx2, avx512, amx"), std::string::npos) << out;
  EXPECT_EQ(run("ATTNUM_NO_AMX=1 " + bin + " version --json", &out), 0);
  EXPECT_EQ(out.find("\"isa\":\"amx\""), std::string::npos) << out;
}

}  // namespace
}  // namespace attnum::attention
