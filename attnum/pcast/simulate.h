#pragma once
// The paper's attention-sink simulation (arXiv 2606.06521 section 6) on an idealized kernel: the
// paper's Algorithm 1 for one query row with fp32 Q, K, V (or injected fp32 scores), so the only
// quantization is the probability cast P8 = E4M3(P * S):
//   m_new = max(m, max_j z_j);  alpha = exp(m - m_new);  P = exp(z - m_new)      (fp32)
//   l = alpha * l + sum(P)       (fp32 P before the cast, as FA3's gSum)
//   O = alpha * O + E4M3(P * S) . V_block                                          (fp32)
//   return O / (S * l)
// With a lazy-rescale threshold tau > 0 (FA4's rescale_threshold, flash-attention issue 2577),
// the max is only moved when a block raises it by more than tau * ln 2, so P can exceed 1 and
// S * P can exceed 448 and saturate.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <optional>

#include <nlohmann/json.hpp>

#include "attnum/attention/kernel_spec.h"
#include "attnum/pcast/theory.h"

namespace attnum::pcast {

/// Options of the idealized kernel for one query row.
struct kernel_options {
  double scale = 256;  ///< static P scale S, applied as an fp32 multiply
  block_order order = block_order::reverse;
  int block = 128;               ///< KV block size B
  bool cast = true;              ///< false: P8 = P * S unrounded (the cast disabled)
  double rescale_threshold = 0;  ///< tau in log2 units (0: the max always follows)
};

/// Counts from one or more kernel rows.
struct kernel_counts {
  int64_t non_sink = 0;           ///< non-sink P values cast
  int64_t underflow = 0;          ///< non-sink P with E4M3(P*S) == 0
  int64_t non_sink_outside = 0;   ///< non-sink P outside the sink block(s)
  int64_t underflow_outside = 0;  ///< of those, cast to zero
  int64_t cast_count = 0;         ///< all P values cast
  int64_t saturated = 0;          ///< P values with P*S > 448 (clamped to 448)
  int64_t sink_saturated = 0;     ///< sink P values with P*S > 448
};

/// Runs the idealized kernel on one query row: z [n_tok] fp32 scaled scores, v [n_tok, d_head]
/// fp32; writes o [d_head]. Keys 0..k_sink-1 are the sinks (only for the counts). Adds to counts
/// when not null. Precondition: n_tok >= 1, block >= 1.
void ideal_row(const float* z, const float* v, int n_tok, int d_head, int k_sink, const kernel_options& opt, float* o,
               kernel_counts* counts);

/// Returns fp64 softmax(z) . v for one row (z [n_tok], v [n_tok, d_head], both as given).
std::vector<double> reference_row(const double* z, const float* v, int n_tok, int d_head);

/// Where the scores come from.
enum class score_source : uint8_t {
  inject,  ///< scores drawn directly: non-sink sigma * N(0,1), sink Delta + sigma * N(0,1)
  qk,      ///< fp32 Q and K built to produce those scores; the kernel forms q.k / sqrt(d) in fp32
};

/// One sweep of the simulation.
struct sim_config {
  std::vector<double> deltas;               ///< sink strengths Delta
  std::vector<double> scales{1, 256, 448};  ///< static scales S
  std::vector<block_order> orders{block_order::forward, block_order::reverse};
  std::vector<double> thresholds{0};  ///< lazy-rescale thresholds tau (log2 units)
  std::vector<int> n_toks{4096};      ///< keys per row N
  int d_head = 128;
  int k_sink = 4;
  int block = 128;
  int q_rows = 64;     ///< query rows per seed (each with its own scores)
  int seeds = 16;      ///< independent data sets; spread is reported across them
  uint64_t seed = 1;   ///< base seed
  double sigma = 1.0;  ///< std of the scores' N(0,1) part (the theory assumes 1)
  score_source source = score_source::inject;
  bool cast = true;  ///< false disables the P cast (a check: the kernel then equals fp64)
  /// A kernel (a resolved preset, knobs applied, e.g. "enabled.q_cast=false" to isolate the P
  /// cast) run through the engine instead of the idealized kernel; empty for the idealized
  /// kernel. With a kernel the scores come from fp32 Q and K (source qk), Q, K, V are cast as the
  /// kernel says, and S, the order and the block size are the kernel's (scales, orders,
  /// thresholds and block are then ignored).
  std::optional<attention::kernel_spec> kernel;
  /// The knob assignments that made `kernel` from its preset (recorded in the rows).
  std::vector<std::string> knobs;
  bool exact_applies = true;  ///< set by simulate(): whether underflow_exact models this P cast
};

/// One row of `attnum pcast simulate` (and of `pcast overflow`).
struct sim_row {
  double delta = 0, scale = 0;
  block_order order = block_order::forward;
  double threshold = 0;  ///< lazy-rescale threshold tau (log2 units)
  std::string kernel = "ideal";
  std::vector<std::string> knobs;         ///< the knobs applied to the kernel (sim_config::knobs)
  nlohmann::json kernel_spec;             ///< the kernel's resolved spec (attention::to_json); null: ideal
  double underflow_measured = 0;          ///< pooled fraction of non-sink P cast to 0
  double underflow_sd = 0;                ///< sd of the per-seed fraction
  double underflow_predicted = 0;         ///< the paper's closed form (forward F; reverse Phi(E[M]-c))
  double underflow_exact = 0;             ///< our exact expectation (theory.h), all non-sinks
  double underflow_outside_measured = 0;  ///< non-sinks outside the sink block only
  double underflow_outside_exact = 0;
  double saturated_fraction = 0;  ///< pooled fraction of all P with S*P > 448
  double sink_saturated_fraction = 0;
  double mse = 0, mse_sd = 0;        ///< mean over seeds of the per-seed output MSE vs fp64, sd
  std::vector<double> mse_per_seed;  ///< per-seed MSE (same data across rows: paired comparisons)
  int seeds = 0, n_tok = 0, d_head = 0, block = 0, k_sink = 0;
  double sigma = 1;
};

/// Called after each finished unit with (done, total); may be empty.
using progress_fn = std::function<void(int64_t done, int64_t total)>;

/// Runs the sweep: every (n_tok, delta, scale, order, threshold) over `seeds` data sets. The data
/// of a seed do not depend on Delta, S or the order (paired comparisons). Deterministic at any
/// thread count. Rows come n_tok, delta, scale, order, threshold (outer to inner).
std::vector<sim_row> simulate(const sim_config& config, const progress_fn& progress = {});

/// The default sweep of the paper (Delta 0..12 step 0.5, S 1/256/448, both orders, N 4096).
/// With quick, fewer seeds and rows (for `attnum study`).
sim_config paper_config(bool quick);

/// The default overflow sweep: S 256 and 448, tau 0 / 0.75 / 4 (FA4's values), both orders.
sim_config overflow_config(bool quick);

/// Returns whether a P value can saturate with scale S and lazy threshold tau: S * 2^tau > 448,
/// i.e. log2 S + tau > log2 448 = 8.807. A value saturates iff s - m_stale > ln(448 / S).
bool can_saturate(double scale, double threshold);

/// One checked claim of the paper: MSE(numerator) / MSE(denominator), paired over seeds.
struct claim_row {
  std::string claim;  ///< "reverse_fix", "both_fixes", "s256_vs_s448", "gain_vs_n"
  int n_tok = 0;
  double delta = 0;
  std::string numerator, denominator;  ///< "forward S=1" etc.
  double ratio = 0;                    ///< geometric mean over seeds of the per-seed MSE ratio
  double ratio_lo = 0, ratio_hi = 0;   ///< exp(mean log ratio -/+ 1.96 se) over seeds
  double mse_num = 0, mse_den = 0;
  int seeds = 0;
};

/// Returns the paired MSE ratio of two rows of the same sweep (same data per seed).
claim_row paired_ratio(const sim_row& num, const sim_row& den);

/// Runs the sweeps behind the paper's MSE claims (N 1024/4096/16384, Delta 0..12) and returns
/// the paired ratios. `base` gives seeds, rows, d_head, block, k_sink and the seed.
std::vector<claim_row> paper_claims(const sim_config& base, const progress_fn& progress = {});

}  // namespace attnum::pcast
