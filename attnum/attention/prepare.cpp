// prepare_layer: the condition's transform, Sage's smooth_k, and the scaled casts of Q, K and V.
//
// The scale rule, the cast of each element and the rule for all-zero groups are formats/scale.h's
// (group_scale, cast_in_group through its span forms: the project's one scaled cast); this file
// only forms the groups (over heads, tokens and channels, per granularity and scope). The
// dequantised value is cast * scale; a group that casts to NaN (Sage's all-zero V channel) sets
// nan_flagged.
//
// Threads: the loops over rows run on attnum::threads() when there is enough work and the caller
// is not already in a parallel region (the studies prepare layers inside their loops over heads).
// Every element, amax and scale is computed by one thread with the arithmetic of the serial loop,
// and the only reductions are max, min and or, which do not depend on the order: the bits are the
// same at any thread count.
//
// Scale scope causal: the amax of a token's group only covers tokens before the end of the token's
// KV block (blocks of block_n tokens), i.e. what a generating kernel has seen by then.
#include <omp.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <exception>

#include "attnum/attention/engine.h"
#include "attnum/attention/engine_detail.h"
#include "attnum/core/error.h"
#include "attnum/core/parallel.h"
#include "attnum/formats/scale.h"
#include "attnum/transforms/centering.h"
#include "attnum/transforms/hadamard.h"

namespace attnum::attention {

float operand_cast::amax(int h, int t0, int t1) const {
  const size_t row0 = static_cast<size_t>(h) * n_tok + t0, rows = static_cast<size_t>(std::max(0, t1 - t0));
  if (row_amax.empty()) return formats::span_amax(values.data() + row0 * d_head, rows * d_head);
  float m = 0;
  for (size_t r = row0; r < row0 + rows; ++r) m = std::max(m, row_amax[r]);  // no NaN here: span_amax skipped them
  return m;
}

namespace {

using formats::format;

struct cast_request {
  const operand_spec* op;
  bool enabled;
  const float* x;  // [n_heads, n_tok, d]
  int n_heads, n_tok, d;
  int heads_per_group;  // kv_group: query heads sharing one scale
  scale_scope scope;
  int scope_block;                          // block_n
  double forced_amax;                       // < 0: compute; else this amax for every group (shared K/V scale)
  const char* check = nullptr;              // non-null: x was not checked yet; fail as copy_finite names it
  const formats::sfu_table* div = nullptr;  // the spec's div_unit (null: IEEE division)
};

// Copies x[0, n) into dst (a prepared operand; only checks x when dst is null), failing on the
// first element that is Inf or NaN ("attention input q: element i is not finite"). One pass over
// x: each chunk is scanned branch-free (so it vectorises) and copied while it is in L1.
void copy_finite(const float* x, size_t n, const char* what, std::vector<float>* dst) {
  constexpr size_t kChunk = 2048;
  if (dst) {
    dst->clear();
    dst->reserve(n);
  }
  for (size_t i0 = 0; i0 < n; i0 += kChunk) {
    const size_t i1 = std::min(n, i0 + kChunk);
    if (!formats::span_all_finite(x + i0, i1 - i0))
      for (size_t i = i0; i < i1; ++i)
        if (!std::isfinite(x[i])) fail("attention input {}: element {} is not finite ({})", what, i, x[i]);
    if (dst) dst->insert(dst->end(), x + i0, x + i1);
  }
}

// The formats layer's cast rule of an operand (scale_max 0: the format's max).
formats::scale_spec cast_rule(const operand_spec& op, const formats::sfu_table* div) {
  formats::scale_spec r;
  r.div = div;
  r.fmt = op.fmt;
  r.fmt_max = op.scale_max;
  r.eps = static_cast<float>(op.eps);
  r.rnd = op.rnd;
  r.multiply_by_reciprocal = op.multiply_reciprocal;
  return r;
}

// Threads for a loop over `elements` elements (see the file comment): 1 below 2^15 elements (a
// parallel region costs more than the work) or inside a parallel region.
int loop_threads(size_t elements) {
  constexpr size_t kMinElements = size_t{1} << 15;
  return elements >= kMinElements && !omp_in_parallel() ? threads() : 1;
}

// Row amax |x| over channels: ra[h*n_tok + t]. With r.check, each row is also tested for Inf and
// NaN while it is in L1 (the pass over memory prepare_layer's check would have made), and a
// non-finite value fails as copy_finite names it.
std::vector<double> row_amax(const cast_request& r) {
  const auto rows = static_cast<int64_t>(r.n_heads) * r.n_tok;
  std::vector<double> ra(static_cast<size_t>(rows));
  const int nt = loop_threads(static_cast<size_t>(rows) * r.d);
  const bool check = r.check != nullptr;
  bool bad = false;
#pragma omp parallel for schedule(static) num_threads(nt) if (nt > 1) reduction(|| : bad)
  for (int64_t row = 0; row < rows; ++row) {
    ra[row] = formats::span_amax(r.x + row * r.d, static_cast<size_t>(r.d));
    if (check) bad = bad || !formats::span_all_finite(r.x + row * r.d, static_cast<size_t>(r.d));
  }
  if (bad) copy_finite(r.x, static_cast<size_t>(rows) * r.d, r.check, nullptr);  // throws, naming the first
  return ra;
}

// Row-wise granularities: every row (h, t) gets one scale from the amax over its group's rows
// (heads of the head group, tokens of its segment in the same class, before the scope limit).
void cast_rowwise(const cast_request& r, operand_cast& out) {
  const operand_spec& op = *r.op;
  const formats::scale_spec rule = cast_rule(op, r.div);
  const auto ra = row_amax(r);
  int hg = 1, seg = r.n_tok, div = 8;  // heads per group, segment length, class = (t % 8) / div
  switch (op.gran) {
    case granularity::tensor:
      hg = r.n_heads;
      break;
    case granularity::head:
      break;
    case granularity::kv_group:
      hg = r.heads_per_group;
      break;
    case granularity::block:
      seg = op.block_rows;
      break;
    case granularity::row_group:
      seg = op.block_rows, div = op.group_div;
      break;
    case granularity::token:
      seg = 1;
      break;
    default:
      ATTNUM_ASSERT(false, "cast_rowwise: granularity");
  }
  if (seg <= 0 || div <= 0 || 8 % div != 0)
    fail("operand scale: block_rows {} / group_div {} must be positive (group_div dividing 8)", seg, div);
  const int n_class = 8 / div;
  const auto rows = static_cast<int64_t>(r.n_heads) * r.n_tok;
  out.row_amax.resize(static_cast<size_t>(rows));
  // 1. The amax of each row's group: per head group, prefix[cls][t] = max over t' <= t of the
  // segment of t, class cls, all heads of the group; the row's amax is the prefix at its limit.
  std::vector<double> group_amax(static_cast<size_t>(rows));
  const int n_head_groups = (r.n_heads + hg - 1) / hg;
  const int nt_groups = n_head_groups > 1 ? loop_threads(static_cast<size_t>(rows) * n_class) : 1;
  worker_errors errors;
#pragma omp parallel num_threads(nt_groups) if (nt_groups > 1)
  {
    std::vector<double> prefix;
    errors.run([&] { prefix.resize(static_cast<size_t>(n_class) * r.n_tok); });
#pragma omp for schedule(static)
    for (int g = 0; g < n_head_groups; ++g)
      errors.run([&] {
        const int h0 = g * hg;
        for (int t = 0; t < r.n_tok; ++t) {
          double m = 0;
          for (int h = h0; h < h0 + hg; ++h) m = std::max(m, ra[static_cast<size_t>(h) * r.n_tok + t]);
          const int cls = (t % 8) / div;
          for (int c = 0; c < n_class; ++c) {
            double prev = (t % seg == 0) ? 0.0 : prefix[static_cast<size_t>(c) * r.n_tok + t - 1];
            prefix[static_cast<size_t>(c) * r.n_tok + t] = c == cls ? std::max(prev, m) : prev;
          }
        }
        for (int t = 0; t < r.n_tok; ++t) {
          const int seg_end = std::min(r.n_tok, (t / seg + 1) * seg);
          int limit = seg_end;
          if (r.scope == scale_scope::causal)
            limit = std::min(seg_end, std::min(r.n_tok, (t / r.scope_block + 1) * r.scope_block));
          const double amax = prefix[static_cast<size_t>((t % 8) / div) * r.n_tok + limit - 1];
          for (int h = h0; h < h0 + hg; ++h) group_amax[static_cast<size_t>(h) * r.n_tok + t] = amax;
        }
      });
  }
  errors.rethrow();
  // 2. Scale and cast, row by row (rows are independent).
  bool nan = false;
  const int nt = loop_threads(static_cast<size_t>(rows) * r.d);
#pragma omp parallel for schedule(static) num_threads(nt) if (nt > 1) reduction(|| : nan)
  for (int64_t row = 0; row < rows; ++row) {
    const double amax = r.forced_amax >= 0 ? r.forced_amax : group_amax[row];
    bool zero_nan = false;
    const float s = formats::group_scale(amax, rule, &zero_nan);
    nan = nan || zero_nan;
    out.row_scale[row] = s;
    float* v = out.values.data() + row * r.d;
    formats::cast_span_in_group(r.x + row * r.d, v, static_cast<size_t>(r.d), amax, s, rule);
    out.row_amax[row] = formats::span_amax(v, static_cast<size_t>(r.d));  // the row is in L1
  }
  out.nan_flagged |= nan;
}

// Per channel (V): scale per (h, token block, c) from the amax over tokens (prefix with causal scope).
void cast_channel(const cast_request& r, operand_cast& out) {
  const formats::scale_spec rule = cast_rule(*r.op, r.div);
  const int cb = r.scope == scale_scope::causal ? r.scope_block : std::max(1, r.n_tok);
  const int ncb = std::max(1, (r.n_tok + cb - 1) / cb);
  const size_t d = static_cast<size_t>(r.d);
  out.col_block = cb;
  out.n_col_blocks = ncb;
  out.col_scale.assign(static_cast<size_t>(r.n_heads) * ncb * d, 1.0f);
  // 1. Per head: the running amax of each channel over tokens (|x| as float: the max is exact),
  // and at each block's end the block's scales and cast operands (formats::group_operand).
  std::vector<float> operand(out.col_scale.size(), 1.0f);
  bool nan = false;
  const int nt_heads = r.n_heads > 1 ? loop_threads(static_cast<size_t>(r.n_heads) * r.n_tok * d) : 1;
  worker_errors errors;
#pragma omp parallel num_threads(nt_heads) if (nt_heads > 1) reduction(|| : nan)
  {
    std::vector<float> amax;
    errors.run([&] { amax.resize(d); });
#pragma omp for schedule(static)
    for (int h = 0; h < r.n_heads; ++h)
      errors.run([&] {
        std::fill(amax.begin(), amax.end(), 0.0f);
        for (int b = 0; b < ncb; ++b) {
          const int t0 = b * cb, t1 = std::min(r.n_tok, t0 + cb);
          for (int t = t0; t < t1; ++t) {
            const float* x = r.x + (static_cast<size_t>(h) * r.n_tok + t) * d;
            for (size_t c = 0; c < d; ++c) {
              const float a = std::fabs(x[c]);
              amax[c] = amax[c] < a ? a : amax[c];  // NaN skipped, as std::max(amax, NaN)
            }
          }
          const size_t hb = (static_cast<size_t>(h) * ncb + b) * d;
          for (size_t c = 0; c < d; ++c) {
            bool zero_nan = false;
            const double a = r.forced_amax >= 0 ? r.forced_amax : static_cast<double>(amax[c]);
            const float s = formats::group_scale(a, rule, &zero_nan);
            nan = nan || zero_nan;
            out.col_scale[hb + c] = s;
            operand[hb + c] = formats::group_operand(a, s, rule);
          }
        }
      });
  }
  errors.rethrow();
  out.nan_flagged |= nan;
  // 2. Cast row by row with the operands of the row's block.
  const auto rows = static_cast<int64_t>(r.n_heads) * r.n_tok;
  out.row_amax.resize(static_cast<size_t>(rows));
  const int nt = loop_threads(static_cast<size_t>(rows) * d);
#pragma omp parallel for schedule(static) num_threads(nt) if (nt > 1)
  for (int64_t row = 0; row < rows; ++row) {
    const int64_t h = row / std::max(1, r.n_tok), t = row % std::max(1, r.n_tok);
    float* v = out.values.data() + row * r.d;
    formats::cast_span_by_operand(r.x + row * r.d, operand.data() + (h * ncb + t / cb) * r.d, v, d, rule);
    out.row_amax[row] = formats::span_amax(v, d);  // the row is in L1
  }
}

operand_cast cast_operand(const cast_request& r) {
  operand_cast out;
  out.n_heads = r.n_heads;
  out.n_tok = r.n_tok;
  out.d_head = r.d;
  out.col_block = std::max(1, r.n_tok);
  out.row_scale.assign(static_cast<size_t>(r.n_heads) * r.n_tok, 1.0f);
  out.col_scale.assign(static_cast<size_t>(r.n_heads) * r.d, 1.0f);
  const size_t n = static_cast<size_t>(r.n_heads) * r.n_tok * r.d;
  // A check left to the cast (r.check): the row-wise casts make it in their amax pass, the other
  // kinds here, before they read the operand.
  auto check_here = [&] {
    if (r.check) copy_finite(r.x, n, r.check, nullptr);
  };
  if (!r.enabled || r.op->fmt == format::fp32) {
    check_here();
    out.values.assign(r.x, r.x + n);
    return out;
  }
  out.values.resize(n);  // every element is written below
  if (r.op->gran == granularity::none) {
    check_here();
    constexpr size_t kChunk = 4096;
    const auto n_chunks = static_cast<int64_t>((n + kChunk - 1) / kChunk);
    const int nt = loop_threads(n);
#pragma omp parallel for schedule(static) num_threads(nt) if (nt > 1)
    for (int64_t ch = 0; ch < n_chunks; ++ch) {
      const size_t i0 = static_cast<size_t>(ch) * kChunk;
      formats::quantize_span(r.x + i0, out.values.data() + i0, std::min(kChunk, n - i0), r.op->fmt, r.op->rnd);
    }
    return out;
  }
  if (r.op->gran == granularity::channel) {
    check_here();
    cast_channel(r, out);
  } else {
    cast_rowwise(r, out);  // checks in row_amax
  }
  return out;
}

}  // namespace

std::shared_ptr<const prepared_layer> prepare_layer(const kernel_spec& spec, const layer_view& lv, condition cond,
                                                    const transform_options& opts, bool keep_operands) {
  if (lv.d_head <= 0 || lv.n_head <= 0 || lv.n_head_kv <= 0 || lv.n_q < 0 || lv.n_kv < 0)
    fail("attention layer: bad dims n_head {} n_head_kv {} n_q {} n_kv {} d_head {}", lv.n_head, lv.n_head_kv, lv.n_q,
         lv.n_kv, lv.d_head);
  if (lv.n_head % lv.n_head_kv != 0)
    fail("attention layer: n_head {} is not a multiple of n_head_kv {}", lv.n_head, lv.n_head_kv);
  if (lv.n_q > lv.n_kv)
    fail("attention layer: n_q {} > n_kv {} (queries must be the last n_q tokens)", lv.n_q, lv.n_kv);
  if (spec.q.gran == granularity::channel || spec.k.gran == granularity::channel)
    fail("kernel {}: per-channel scales are only supported for V (Q/K scales must factor out of q.k)", spec.name);
  auto p = std::make_shared<prepared_layer>();
  p->spec = spec;
  p->cond = cond;
  p->n_head = lv.n_head, p->n_head_kv = lv.n_head_kv, p->n_q = lv.n_q, p->n_kv = lv.n_kv, p->d_head = lv.d_head;
  const int d = lv.d_head;
  const size_t nq = static_cast<size_t>(lv.n_head) * lv.n_q * d, nk = static_cast<size_t>(lv.n_head_kv) * lv.n_kv * d;
  // Which operands a step below changes in place (and so must copy): the condition's center (K)
  // and rotation (Q, K), Sage's smooth_k (K) and v1's scale folded into Q; V never.
  const bool rotated = rotates(cond);
  const bool smooths = spec.smooth_k && spec.enabled.k_cast;
  const bool copy_q = keep_operands || rotated || spec.scaling == score_scaling::dequant_unit;
  const bool copy_k = keep_operands || transforms_k(cond) || smooths;
  const bool copy_v = keep_operands;
  // The input check (every value finite), naming the first bad element of q before k before v.
  // A copied operand is checked as it is copied (below, on up to three threads). An operand read
  // in place is checked by its cast (4.), in the row-wise casts' amax pass, which reads it anyway:
  // one pass over it fewer. The casts run q, k, v in that order, after every copy, and a failed
  // copy first checks the operands before it that were left to their casts, so the first bad
  // operand is named as by checking all three here.
  const float* src[3] = {lv.q, lv.k, lv.v};
  const size_t len[3] = {nq, nk, nk};
  const char* what[3] = {"q", "k", "v"};
  {
    std::vector<float>* dst[3] = {copy_q ? &p->q : nullptr, copy_k ? &p->k : nullptr, copy_v ? &p->v : nullptr};
    std::exception_ptr err[3];
    const int nt = loop_threads(nq + 2 * nk);
#pragma omp parallel for schedule(dynamic, 1) num_threads(std::min(nt, 3)) if (nt > 1)
    for (int i = 0; i < 3; ++i) {
      if (!dst[i]) continue;  // checked by its cast
      try {
        copy_finite(src[i], len[i], what[i], dst[i]);
      } catch (...) {
        err[i] = std::current_exception();
      }
    }
    for (int i = 0; i < 3; ++i)
      if (err[i]) {
        for (int j = 0; j < i; ++j)
          if (!dst[j]) copy_finite(src[j], len[j], what[j], nullptr);  // left to its cast
        std::rethrow_exception(err[i]);
      }
  }
  const auto [bm, bn] = spec.tile_for(d);
  if (bm <= 0 || bn <= 0) fail("kernel {}: block sizes must be positive (block_m {}, block_n {})", spec.name, bm, bn);
  // 1. The condition (design.md): center K per kv head, then rotate Q and K with one matrix;
  // each step computed in double and its output rounded once to the transform dtype, as a real
  // pipeline stores the transformed tensors (kernels.md "Transform dtype"). Operands a condition
  // does not transform (plain: Q and K; center: Q) reach the casts as given.
  const formats::format td = spec.transform_dtype;
  transforms::check_transform_dtype(td, fmt::format("kernel {} transform_dtype", spec.name));
  if (centers(cond))
    for (int g = 0; g < lv.n_head_kv; ++g)
      transforms::center_keys(p->k.data() + static_cast<size_t>(g) * lv.n_kv * d, lv.n_kv, d, opts.causal_center, td);
  if (rotates(cond)) {
    opts.rotation.apply(p->q.data(), static_cast<int64_t>(lv.n_head) * lv.n_q, d, td);
    opts.rotation.apply(p->k.data(), static_cast<int64_t>(lv.n_head_kv) * lv.n_kv, d, td);
  }
  // 2. Sage's smooth_k (kernels.md 2a.2): k - mean over tokens, both rounded to the input dtype.
  // Each channel's mean sums its tokens in order (one thread per kv head); then every row is
  // rounded on its own.
  if (spec.smooth_k && spec.enabled.k_cast) {
    const formats::rounding rne = formats::rounding::nearest_even;
    std::vector<float> km(static_cast<size_t>(lv.n_head_kv) * d);
    const int nt_heads = lv.n_head_kv > 1 ? loop_threads(nk) : 1;
    worker_errors errors;
#pragma omp parallel num_threads(nt_heads) if (nt_heads > 1)
    {
      std::vector<double> mean;
      errors.run([&] { mean.resize(static_cast<size_t>(d)); });
#pragma omp for schedule(static)
      for (int g = 0; g < lv.n_head_kv; ++g)
        errors.run([&] {
          const float* k = p->k.data() + static_cast<size_t>(g) * lv.n_kv * d;
          std::fill(mean.begin(), mean.end(), 0.0);
          for (int t = 0; t < lv.n_kv; ++t)
            for (int c = 0; c < d; ++c) mean[c] += k[static_cast<size_t>(t) * d + c];
          for (int c = 0; c < d; ++c)
            km[static_cast<size_t>(g) * d + c] =
                quantize_value(spec.smooth_k_round, static_cast<float>(mean[c] / lv.n_kv), rne);
        });
    }
    errors.rethrow();
    const auto rows = static_cast<int64_t>(lv.n_head_kv) * lv.n_kv;
    const int nt = loop_threads(nk);
#pragma omp parallel num_threads(nt) if (nt > 1)
    {
      std::vector<float> diff;
      errors.run([&] { diff.resize(static_cast<size_t>(d)); });
#pragma omp for schedule(static)
      for (int64_t row = 0; row < rows; ++row)
        errors.run([&] {
          float* k = p->k.data() + row * d;
          const float* m = km.data() + (row / std::max(1, lv.n_kv)) * d;
          for (int c = 0; c < d; ++c) diff[c] = k[c] - m[c];
          formats::quantize_span(diff.data(), k, static_cast<size_t>(d), spec.smooth_k_round, rne);
        });
    }
    errors.rethrow();
    p->k_mean = std::move(km);
  }
  // 3. Sage v1 folds softmax_scale * log2(e) into Q before its cast: quant_per_block.py passes
  // sm_scale * 1.44269504 (a Python double) as the kernel's fp32 argument, then x *= sm_scale.
  if (spec.scaling == score_scaling::dequant_unit) {
    const float f = static_cast<float>(1.0 / std::sqrt(static_cast<double>(d)) * 1.44269504);
    for (float& x : p->q) x *= f;
    p->q_factor = f;
  }
  // 4. Casts, from the copies or (not kept, not changed) the caller's arrays.
  const float* q = copy_q ? p->q.data() : lv.q;
  const float* k = copy_k ? p->k.data() : lv.k;
  const float* v = copy_v ? p->v.data() : lv.v;
  double amax_kv = -1;
  if (spec.kv_shared_scale && spec.k.gran == granularity::tensor && spec.v.gran == granularity::tensor &&
      spec.scope == scale_scope::sequence)
    amax_kv = std::max(formats::span_amax(k, nk), formats::span_amax(v, nk));
  const int gs = lv.n_head / lv.n_head_kv;
  const formats::sfu_table* div = spec.div_unit.table.get();  // the quantizer's divisions (div_unit)
  p->q8 = cast_operand(
      {&spec.q, spec.enabled.q_cast, q, lv.n_head, lv.n_q, d, gs, spec.scope, bn, -1, copy_q ? nullptr : what[0], div});
  p->k8 = cast_operand({&spec.k, spec.enabled.k_cast, k, lv.n_head_kv, lv.n_kv, d, 1, spec.scope, bn,
                        spec.enabled.k_cast && spec.enabled.v_cast ? amax_kv : -1, copy_k ? nullptr : what[1], div});
  p->v8 = cast_operand({&spec.v, spec.enabled.v_cast, v, lv.n_head_kv, lv.n_kv, d, 1, spec.scope, bn,
                        spec.enabled.k_cast && spec.enabled.v_cast ? amax_kv : -1, copy_v ? nullptr : what[2], div});
  return p;
}

}  // namespace attnum::attention
