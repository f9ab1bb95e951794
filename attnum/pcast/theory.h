#pragma once
// P-cast theory: closed forms for the softmax probability cast P -> E4M3(P*S) under attention
// sinks (arXiv 2606.06521, "P-Cast Precision in FP8 Attention"; docs/pcast.md checks each claim).
//
// Setting (the paper's section 3.1): one query row, N keys, k sink keys whose scores are
// Delta + z (z ~ N(0,1)), every other score s ~ N(0,1). The kernel keeps a running max m over the
// KV blocks it has processed and casts S*exp(s - m) to E4M3 (RNE, satfinite). E4M3's smallest
// subnormal is 2^-9, so S*p <= 2^-10 (half of it; the tie rounds to the even code 0) becomes 0:
//   p underflows  <=>  s < m - c(S),   c(S) = 10 ln 2 + ln S.
#include <cstdint>
#include <string>
#include <vector>

namespace attnum::pcast {

/// 10 ln 2 = 6.931471805599453 (the paper rounds it to 6.93): -ln of E4M3's flush threshold 2^-10.
inline constexpr double kLn2Times10 = 6.931471805599453094;
/// ln 448 = 6.104793232414985: E4M3's largest finite value is (1 + 6/8) * 2^8 = 448.
inline constexpr double kLn448 = 6.104793232414985;

/// KV block order of the online softmax: forward (0 -> N) or reverse (N -> 0, FA3's choice).
enum class block_order : uint8_t { forward, reverse };
/// Returns "forward" or "reverse".
const char* order_name(block_order o);
/// Parses "forward"/"fwd" or "reverse"/"rev"; throws attnum::error otherwise.
block_order parse_order(const char* text);

/// Returns delta_k = E[max of k iid standard normals], by quadrature of
/// int x d(Phi(x)^k) (delta_1 = 0, delta_2 = 1/sqrt(pi), delta_4 = 1.0293753730...).
/// Precondition: k >= 1.
double delta_k(int k);

/// Returns c(S) = 10 ln 2 + ln S: a probability p underflows iff p < exp(-c(S)).
double flush_threshold(double scale);

/// Returns the paper's leading-order underflow fraction of non-sink P under forward order,
/// F(Delta, S) = Phi(Delta + delta_k - 10 ln 2 - ln S) (the running max is set to its mean).
double underflow_closed_form(double delta, double scale, int k_sink);

/// Returns Delta_c = 10 ln 2 + ln S - delta_k, where F(Delta_c, S) = 1/2.
double delta_c(double scale, int k_sink);

/// Shape of a simulated row for the exact expectation.
struct row_shape {
  int n_tok = 4096;  ///< keys per query row (N)
  int block = 128;   ///< KV block size (B)
  int k_sink = 4;    ///< sink keys at positions 0..k_sink-1
};

/// Returns the exact expected fraction of non-sink P that underflow, for iid N(0,1) non-sink
/// scores and sink scores Delta + N(0,1): for each block, the running max after that block is
/// processed is G = max(sinks seen, other non-sinks seen), with CDF H(g) = Phi(g - Delta)^k_seen *
/// Phi(g)^n_seen, and a non-sink underflows with probability E[Phi(G - c)] = 1 - int H(g)
/// phi(g - c) dg (integration by parts). No leading-order step: this integrates over the sink
/// maximum's distribution and includes non-sinks that raise the max.
double underflow_exact(double delta, double scale, const row_shape& shape, block_order order);

/// Same, counting only non-sinks outside the sink block (what the paper's reverse-order guarantee
/// is about: the B - k non-sinks sharing block 0 with the sinks always see the sink max).
double underflow_exact_outside_sink_block(double delta, double scale, const row_shape& shape, block_order order);

/// Returns dp(S): the largest spacing of the E4M3 grid over the scaled range [0, S] divided by S
/// (the paper's normalized worst-case quantization step; its half is the largest point error).
/// Read off the real grid (formats::quantize_e4m3_sat), not from the closed form. For S > 448
/// the values in (448, S] saturate to 448: that gap counts as a step of 2 (S - 448), so that
/// dp/2 stays the largest point error. Precondition: scale > 0.
double dp(double scale);

/// The reverse-order bound for one N (the paper's Theorem, section 4).
struct reverse_bound_row {
  int64_t n_tok = 0;
  double scale = 0;
  double flush = 0;           ///< c(S) = 10 ln 2 + ln S
  double max_mean = 0;        ///< E[max of N standard normals] (quadrature)
  double sqrt_2_ln_n = 0;     ///< sqrt(2 ln N), the asymptote of max_mean
  double max_q999999 = 0;     ///< the 1 - 1e-6 quantile of the max of N standard normals
  double p_underflow = 0;     ///< E[Phi(M_N - c)]: per-value underflow bound (M_N = max of all N)
  double expected_count = 0;  ///< N * p_underflow: expected underflows per row
  double paper_m = 0;         ///< the paper's "m <= 2 ln N + 1"
};

/// Returns the reverse-order underflow bound for N keys: a non-sink processed before the sink
/// block sees a running max no larger than the max M_N of all N scores.
reverse_bound_row reverse_bound(int64_t n_tok, double scale);

/// One row of `attnum pcast theory`.
struct theory_row {
  double delta = 0, scale = 0;
  int k_sink = 0;
  double delta_k = 0;
  double underflow_fraction = 0;  ///< the paper's closed form F(Delta, S)
  double underflow_exact = 0;     ///< exact expectation, forward order, row shape given
  double delta_c = 0;
};

/// Returns the theory rows for every (delta, scale) pair, deltas outer.
std::vector<theory_row> theory_table(const std::vector<double>& deltas, const std::vector<double>& scales,
                                     const row_shape& shape);

/// One row of `attnum pcast dp`.
struct dp_row {
  double scale = 0, dp = 0;
};
/// Returns dp(S) for each scale.
std::vector<dp_row> dp_table(const std::vector<double>& scales);

/// Expands "A:B:STEP" into A, A+STEP, ..., B inclusive (tolerant of float steps: B is included
/// when within STEP*1e-9 of the last point); a single number gives itself. Throws attnum::error
/// naming `what` on malformed text or a non-positive step.
std::vector<double> parse_range(const std::string& text, const char* what);
/// Expands a comma-separated list whose items are numbers or A:B:STEP ranges.
std::vector<double> parse_list(const std::string& text, const char* what);

}  // namespace attnum::pcast
