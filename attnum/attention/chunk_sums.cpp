// The QK and PV chunk-sum backends of the engine (chunk_sums.h): the choice per head and the
// calls into the kernels. The numerics of the sums themselves are in amx.cpp, plane_gemm.cpp and
// fma_gemm.cpp (each kernel entry notes its path for isa::count_dispatches); the accumulator
// rounding is round_add (engine_detail.h).
#include "attnum/attention/chunk_sums.h"

#include <Eigen/Dense>

#include <algorithm>

#include "attnum/attention/amx.h"
#include "attnum/attention/causal.h"
#include "attnum/attention/engine.h"
#include "attnum/attention/engine_detail.h"
#include "attnum/attention/fma_gemm.h"
#include "attnum/attention/isa.h"
#include "attnum/attention/plane_gemm.h"
#include "attnum/core/error.h"
#include "attnum/formats/scale.h"

namespace attnum::attention {
namespace {

using dmat = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using dmap = Eigen::Map<const dmat>;
using fmat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using fmap = Eigen::Map<const fmat>;

// C[r][j] = sum over k in [0, kn) of A[r*lda + k] * B[k*ldb + j], each sum in ascending k (separate
// multiply and add, as the plain loop): blocks of 32 columns whose accumulators stay in vector
// registers. The order of every sum is unchanged.
template <typename TA>
void ordered_rows(const TA* A, int lda, const float* B, int ldb, int r0, int rows, int n, int kn, double* C, int ldc) {
  constexpr int kJ = 32;  // 4 AVX-512 double vectors of accumulators per row
  for (int r = r0; r < rows; ++r) {
    const TA* ar = A + static_cast<size_t>(r) * lda;
    double* cr = C + static_cast<size_t>(r) * ldc;
    for (int j = 0; j < n; j += kJ) {
      const int jn = std::min(kJ, n - j);
      double acc[kJ] = {};
      for (int k = 0; k < kn; ++k) {
        const double a = static_cast<double>(ar[k]);
        const float* b = B + static_cast<size_t>(k) * ldb + j;
#if !defined(__clang__)
#pragma GCC ivdep
#endif
        for (int jj = 0; jj < jn; ++jj) acc[jj] += a * static_cast<double>(b[jj]);
      }
      for (int jj = 0; jj < jn; ++jj) cr[j + jj] = acc[jj];
    }
  }
}

// Float A: the double-FMA micro-kernels of fma_gemm.h on AVX2 / AVX-512 (same order, same bits:
// a float product is exact in double, so the FMA rounds as the separate add does); double A (the
// fp64 presets) and the scalar path: the loop above.
template <typename TA>
void ordered_gemm(const TA* A, int lda, const float* B, int ldb, int rows, int n, int kn, double* C, int ldc) {
  if constexpr (std::is_same_v<TA, float>)
    if (fma::ordered_gemm(A, lda, B, ldb, rows, n, kn, C, ldc)) return;
  ordered_rows(A, lda, B, ldb, 0, rows, n, kn, C, ldc);
}

}  // namespace

std::string_view name(qk_kind k) {
  switch (k) {
    case qk_kind::amx_bf16:
      return "amx_bf16";
    case qk_kind::amx_int8:
      return "amx_int8";
    case qk_kind::int16_planes:
      return "int16_planes";
    case qk_kind::double_fma:
      return "double_fma";
    case qk_kind::ordered_loop:
      return "ordered_loop";
    case qk_kind::eigen_double:
      return "eigen_double";
    case qk_kind::int8_vpmaddwd:
      return "int8_vpmaddwd";
    case qk_kind::int8_fp32_gemm:
      return "int8_fp32_gemm";
  }
  return "?";
}

std::string_view name(pv_kind k) {
  switch (k) {
    case pv_kind::amx_bf16:
      return "amx_bf16";
    case pv_kind::int16_planes:
      return "int16_planes";
    case pv_kind::double_fma:
      return "double_fma";
    case pv_kind::ordered_loop:
      return "ordered_loop";
    case pv_kind::eigen_double:
      return "eigen_double";
  }
  return "?";
}

// The first kind that applies, in the order of the list. The kernels that need packed operands
// pack them here, into this thread's thread-local storage: run_heads_t builds one head per thread
// and the workers only read them.
qk_sums qk_sums::make(const prepared_layer& L, int h, const kernel_spec& s, int row_tile, int bn) {
  qk_sums b;
  const int g = L.kv_head(h), d = L.d_head, n_q = L.n_q, n_kv = L.n_kv;
  const size_t qoff = static_cast<size_t>(h) * n_q, koff = static_cast<size_t>(g) * n_kv;
  b.d_ = d, b.n_kv_ = n_kv;
  b.q8_ = L.q8.values.data() + qoff * d;
  b.k8_ = L.k8.values.data() + koff * d;
  using formats::format;
  const auto& e = L.spec.enabled;
  const bool q_e4 = e.q_cast && L.spec.q.fmt == format::e4m3fn, k_e4 = e.k_cast && L.spec.k.fmt == format::e4m3fn;
  const bool q_i8 = e.q_cast && L.spec.q.fmt == format::int8, k_i8 = e.k_cast && L.spec.k.fmt == format::int8;
  // Every product and chunk sum exact in double (chunk_sums.h): any kernel gives the same sums.
  const bool exact =
      ((q_e4 && k_e4 && s.qk_acc.k_step <= 32) || (q_i8 && k_i8)) && L.spec.scaling != score_scaling::dequant_unit;
  const bool e4 = exact && q_e4 && k_e4;
  // INT8 x INT8 with d < 1024: every partial sum is an integer of magnitude <= d * 2^14 < 2^24,
  // exact in fp32 (with or without FMA), so the fp32 GEMM gives the same sums at twice the rate.
  const bool int8 = exact && q_i8 && k_i8 && d < 1024;
  if (amx::available()) {
    const bool rows16 = row_tile % 16 == 0;  // tiles of rows start at multiples of 16
    if (e4 && s.qk_acc.k_step == 32 && s.qk_acc.kind != acc_kind::int32 && bn % 16 == 0 && rows16) {
      static thread_local amx::exact_qk planes;
      if (planes.build(b.q8_, n_q, b.k8_, n_kv, d)) {
        b.kind_ = qk_kind::amx_bf16, b.amx_ = &planes;
        return b;
      }
    }
    if (int8 && s.qk_acc.kind == acc_kind::int32 && bn % 16 == 0 && rows16) {
      static thread_local amx::int8_qk planes;
      if (planes.build(b.q8_, n_q, b.k8_, n_kv, d)) {
        b.kind_ = qk_kind::amx_int8, b.amx_i8_ = &planes;
        return b;
      }
    }
  }
  if (int8) {
    // AVX2 / AVX-512 / NEON: integer pair products (fma_gemm.h), K and Q packed once per head
    if (planes::panel_width() > 0) {
      static thread_local fma::packed_i8_b kp;
      static thread_local fma::packed_i8_a qp;
      kp.build(b.k8_, d, n_kv, d);
      if (kp.W > 0 && bn % kp.W == 0) {
        qp.build(b.q8_, d, n_q, d);
        b.kind_ = qk_kind::int8_vpmaddwd, b.k_i8_ = &kp, b.q_i8_ = &qp;
        return b;
      }
    }
    b.kind_ = qk_kind::int8_fp32_gemm;
    return b;
  }
  // Without AMX, on a vector path: the exact E4M3 chunk sums go through the chunk kernels (int16
  // planes, else the double-FMA kernels: the ascending double sum of a chunk is its exact sum)
  // rather than Eigen's double GEMM. NEON has the planes but no double-FMA kernels: a head whose
  // planes cannot be built goes back to Eigen there.
  const bool neon = isa::at_least(isa::path::neon);
  const bool e4_kernels = e4 && (isa::at_least(isa::path::avx2) || neon);
  // The int16 exponent planes (plane_gemm.h), where the head's operands allow (no NaN, sparse low
  // planes): Q and K split once per head.
  if (const int W = planes::panel_width(); W > 0 && planes::enabled()) {
    const int kq = s.qk_acc.k_step;
    int sa = 0, sb = 0;
    double qmax = 0, kmax = 0;  // each operand's amax read once, for the shifts and the builds
    if (e4_kernels && kq <= 32 && kq % 2 == 0 && bn % W == 0 &&
        planes::choose_shifts(qmax = L.q8.amax(h, 0, n_q), kmax = L.k8.amax(g, 0, n_kv), kq, sa, sb)) {
      static thread_local planes::plane_a qa;
      static thread_local planes::plane_b kb;
      qa.build(b.q8_, d, n_q, d, sa, qmax);
      if (qa.ok) kb.build(b.k8_, d, true, d, n_kv, sb, kmax);
      if (qa.ok && kb.ok) {
        b.kind_ = qk_kind::int16_planes, b.q_planes_ = &qa, b.k_planes_ = &kb;
        return b;
      }
    }
  }
  if (exact && !(e4_kernels && !neon)) {
    b.qd_.assign(b.q8_, b.q8_ + static_cast<size_t>(n_q) * d);
    b.kd_.assign(b.k8_, b.k8_ + static_cast<size_t>(n_kv) * d);
    b.kind_ = qk_kind::eigen_double;
    return b;
  }
  // The ordered sums (and the exact E4M3 ones the planes refused): K (B = K^T) packed once into
  // the double kernels' panels, Q as doubles beside it.
  if (const int W = isa::at_least(isa::path::avx2) ? fma::panel_width() : 0; W > 0 && bn % W == 0) {
    static thread_local fma::packed_b kp;
    kp.build(b.k8_, d, true, d, n_kv);
    static thread_local fma::packed_a qp;
    qp.build(b.q8_, d, n_q, d);
    b.kind_ = qk_kind::double_fma, b.k_pack_ = &kp, b.q_pack_ = &qp;
    return b;
  }
  // the ordered loop reads K transposed
  b.kT_.resize(static_cast<size_t>(d) * n_kv);
  for (int j = 0; j < n_kv; ++j)
    for (int k = 0; k < d; ++k) b.kT_[static_cast<size_t>(k) * n_kv + j] = b.k8_[static_cast<size_t>(j) * d + k];
  b.kind_ = qk_kind::ordered_loop;
  return b;
}

void qk_sums::run(int r0, int rows, int j0, int n, long off, const accumulator_spec& model, double* sacc, float* x,
                  int ld, chunk_scratch& s) const {
  const int d = d_;
  switch (kind_) {
    case qk_kind::amx_bf16:
      if (x)
        amx_->run(r0, rows, j0, n, model, x, ld, off);
      else
        amx_->run(r0, rows, j0, n, model, sacc, ld, off);
      return;
    case qk_kind::amx_int8:  // the same exact int32 sums from AMX-INT8 tiles
      amx_i8_->run(r0, rows, j0, n, sacc, ld, off);
      return;
    case qk_kind::int8_vpmaddwd:
    case qk_kind::int8_fp32_gemm: {  // int32 accumulator: one exact sum over all of d
      const bool packed =
          kind_ == qk_kind::int8_vpmaddwd && fma::int8_gemm_nt(*q_i8_, r0, rows, *k_i8_, j0, n, sacc, ld);
      if (!packed && !fma::int8_gemm_nt(q8_ + static_cast<size_t>(r0) * d, d, k8_ + static_cast<size_t>(j0) * d, d,
                                        rows, n, d, sacc, ld)) {
        const fmap Q(q8_ + static_cast<size_t>(r0) * d, rows, d), K(k8_ + static_cast<size_t>(j0) * d, n, d);
        s.cf.resize(static_cast<size_t>(rows) * n);
        Eigen::Map<fmat> C(s.cf.data(), rows, n);
        C.noalias() = Q * K.transpose();
        for (int r = 0; r < rows; ++r)
          for (int j = 0; j < n; ++j) sacc[static_cast<size_t>(r) * ld + j] = static_cast<double>(C(r, j));
      }
      return;
    }
    case qk_kind::eigen_double: {
      const dmap Q(qd_.data() + static_cast<size_t>(r0) * d, rows, d),
          K(kd_.data() + static_cast<size_t>(j0) * d, n, d);
      // INT8: every partial sum is an integer below 2^53: one GEMM over all of d is exact.
      const int ks = model.kind == acc_kind::int32 ? d : model.k_step;
      s.c.resize(static_cast<size_t>(rows) * n);
      Eigen::Map<dmat> C(s.c.data(), rows, n);
      for (int k0 = 0; k0 < d; k0 += ks) {
        const int kn = std::min(d, k0 + ks) - k0;
        C.noalias() = Q.middleCols(k0, kn) * K.middleCols(k0, kn).transpose();
        for (int r = 0; r < rows; ++r) {
          double* acc = sacc + static_cast<size_t>(r) * ld;
          if (k0 == 0) std::fill(acc, acc + n, 0.0);
          round_add(model, acc, &C(r, 0), n);
        }
      }
      return;
    }
    case qk_kind::int16_planes:
    case qk_kind::double_fma:
    case qk_kind::ordered_loop:
      break;
  }
  const int ks = model.k_step;
  s.c.resize(static_cast<size_t>(rows) * n);
  double* const cbuf = s.c.data();
  // packed Q and K with the fp32 model: every chunk of d rounded into its accumulator in the
  // kernels' epilogue, all chunks in one call (fma_gemm.h, fp32_acc::k_step); micro-tiles wholly
  // above the diagonal are skipped (the softmax gives masked scores the mask value)
  const bool fused = kind_ == qk_kind::double_fma && model.kind == acc_kind::fp32;
  if (fused) {
    fma::fp32_acc out{x, x ? nullptr : sacc, ld, true, nullptr, ks};
    out.mask_after = off + r0 - j0;
    const bool ran = fma::ordered_gemm(*q_pack_, r0, *k_pack_, 0, d, j0, n, rows, out);
    ATTNUM_ASSERT(ran, "qk_sums: packed K refused (block {} width {})", j0, k_pack_->W);
  }
  for (int k0 = 0; k0 < d && !fused; k0 += ks) {
    const int kn = std::min(d, k0 + ks) - k0;
    // rows [g, g + nr) of the chunk's sums (C at row g) rounded into their accumulators: the
    // fp32 scores in x or sacc
    auto add = [&](int g, int nr, const double* C, int ldc, int nc) {
      auto into = [&](auto* acc) {
        if (k0 == 0)
          round_add_rows<true>(model, acc + static_cast<size_t>(g) * ld, ld, C, ldc, nc, nr);
        else
          round_add_rows(model, acc + static_cast<size_t>(g) * ld, ld, C, ldc, nc, nr);
      };
      if (x)
        into(x);
      else
        into(sacc);
    };
    if (kind_ == qk_kind::int16_planes) {  // make() built the planes for this path, k_step and block width
      // each group of rows is rounded as soon as its chunk sums are done, over the columns
      // that hold its unmasked scores (the softmax gives the others the mask value)
      const bool ran = planes::qk_chunk(*q_planes_, *k_planes_, r0, rows, k0, kn, j0, n, cbuf, n,
                                        planes::make_sink(add), off + r0 - j0);
      ATTNUM_ASSERT(ran, "qk_sums: the QK planes refused chunk {} of block {}", k0, j0);
      continue;
    } else if (kind_ == qk_kind::double_fma) {  // make() packed Q and K for this path and block width
      const bool ran = fma::ordered_gemm(*q_pack_, r0, *k_pack_, k0, kn, j0, n, rows, cbuf, n);
      ATTNUM_ASSERT(ran, "qk_sums: packed K refused (block {} width {})", j0, k_pack_->W);
    } else {
      ordered_gemm(q8_ + static_cast<size_t>(r0) * d + k0, d, kT_.data() + static_cast<size_t>(k0) * n_kv_ + j0, n_kv_,
                   rows, n, kn, cbuf, n);
    }
    add(0, rows, cbuf, n, n);
  }
}

pv_sums pv_sums::make(const prepared_layer& L, int g, const kernel_spec& s, int bn, const float* vp, bool uniform,
                      bool fp32) {
  pv_sums b;
  const int d = L.d_head, n_kv = L.n_kv;
  b.d_ = d, b.vp_ = vp;
  using formats::format;
  const auto& e = L.spec.enabled;
  // E4M3 P8 x E4M3 V in chunks of <= 32: exact chunk sums (chunk_sums.h)
  const bool exact =
      e.v_cast && L.spec.v.fmt == format::e4m3fn && uniform && s.p_fmt == format::e4m3fn && s.pv_acc.k_step <= 32;
  if (amx::available() && fp32 && exact && s.pv_acc.k_step == 32 && bn % 32 == 0 && d % 16 == 0) {
    static thread_local amx::exact_pv planes;
    if (planes.build(vp, n_kv, d)) {
      b.kind_ = pv_kind::amx_bf16, b.amx_ = &planes;
      return b;
    }
  }
  // As for QK: the exact sums through the chunk kernels (planes, else double FMA) on a vector
  // path; NEON without planes goes back to Eigen.
  const bool neon = isa::at_least(isa::path::neon);
  const bool e4_kernels = fp32 && exact && (isa::at_least(isa::path::avx2) || neon);
  const int kv = s.pv_acc.k_step;
  if (const int W = planes::panel_width();
      W > 0 && planes::enabled() && e4_kernels && kv <= 32 && kv % 2 == 0 && bn % 2 == 0) {
    static thread_local planes::plane_b vb;
    // V gets 13 bits, leaving P 2^31 / (32 * 2^13) = 2^13: per-tensor scaled P8 up to 256 (FA3's
    // exponent offset 8) keeps values down to 2^-10 of its maximum in the hi plane, so the
    // second P plane runs only for rows with smaller probabilities.
    const double vmax = uniform ? L.v8.amax(g, 0, n_kv) : formats::span_amax(vp, static_cast<size_t>(n_kv) * d);
    const int sv = planes::shift_for(vmax, 13);
    if (sv >= 0) vb.build(vp, d, false, n_kv, d, sv, vmax);
    if (sv >= 0 && vb.ok) {
      b.kind_ = pv_kind::int16_planes, b.v_planes_ = &vb;
      return b;
    }
  }
  if (exact && !(e4_kernels && !neon)) {
    b.vd_.assign(vp, vp + static_cast<size_t>(n_kv) * d);
    b.kind_ = pv_kind::eigen_double;
    return b;
  }
  // V packed once into the double kernels' panels (AVX2 / AVX-512)
  if (fp32 && isa::at_least(isa::path::avx2) && fma::panel_width() > 0) {
    static thread_local fma::packed_b vpk;
    vpk.build(vp, d, false, n_kv, d);
    b.kind_ = pv_kind::double_fma, b.v_pack_ = &vpk;
    return b;
  }
  b.kind_ = pv_kind::ordered_loop;
  return b;
}

void pv_sums::run(const float* p8, int ldp, int rows, const char* live, int j0, int n, const accumulator_spec& model,
                  float* acc, int ld, const int* p_end, chunk_scratch& s) const {
  run_t(p8, ldp, rows, live, j0, n, model, acc, ld, p_end, s);
}
void pv_sums::run(const double* p8, int ldp, int rows, const char* live, int j0, int n, const accumulator_spec& model,
                  double* acc, int ld, const int* p_end, chunk_scratch& s) const {
  run_t(p8, ldp, rows, live, j0, n, model, acc, ld, p_end, s);
}

template <typename T>
void pv_sums::run_t(const T* p8, int ldp, int rows, const char* live, int j0, int n, const accumulator_spec& model,
                    T* acc, int ld, const int* p_end, chunk_scratch& s) const {
  const int d = d_, ks = model.k_step, j1 = j0 + n;
  if constexpr (std::is_same_v<T, float>)
    if (kind_ == pv_kind::amx_bf16 && amx_->run(p8, ldp, rows, live, j0, n, model, acc, ld)) return;
  if (kind_ == pv_kind::eigen_double && !vd_.empty()) {
    s.pm.resize(static_cast<size_t>(rows) * n);
    Eigen::Map<dmat> pm(s.pm.data(), rows, n);
    for (int r = 0; r < rows; ++r)
      for (int j = 0; j < n; ++j) pm(r, j) = static_cast<double>(p8[static_cast<size_t>(r) * ldp + j]);
    const dmap V(vd_.data() + static_cast<size_t>(j0) * d, n, d);
    s.c.resize(static_cast<size_t>(rows) * d);
    Eigen::Map<dmat> C(s.c.data(), rows, d);
    for (int c0 = 0; c0 < n; c0 += ks) {
      const int cn = std::min(n, c0 + ks) - c0;
      C.noalias() = pm.middleCols(c0, cn) * V.middleRows(c0, cn);
      for (int r = 0; r < rows; ++r) {
        if (!live[r]) continue;
        round_add(model, acc + static_cast<size_t>(r) * ld, &C(r, 0), d);
      }
    }
    return;
  }
  // packed V with the fp32 model (no V planes then): every chunk rounded into the live rows'
  // accumulators in the kernels' epilogue, all chunks of the block in one call, each row's
  // products stopping at its last nonzero P8 (fp32_acc::k_step, k_end)
  bool fused = false;
  if constexpr (std::is_same_v<T, float>)
    if (v_pack_ && model.kind == acc_kind::fp32) {
      fma::fp32_acc out{acc, nullptr, ld, false, live, ks};
      out.k_end = p_end;
      fused = fma::ordered_gemm(p8, ldp, *v_pack_, j0, n, 0, d, rows, out);
    }
  s.c.resize(static_cast<size_t>(rows) * d);
  double* const cbuf = s.c.data();
  for (int c0 = j0; c0 < j1 && !fused; c0 += ks) {
    const int cn = std::min(j1, c0 + ks) - c0;
    // rows [g, g + nr) of the chunk's sums (C at row g) rounded into the live rows' accumulators
    // (all live: the group as one block)
    auto add = [&](int g, int nr, const double* C, int ldc, int nc) {
      if (std::all_of(live + g, live + g + nr, [](char x) { return x != 0; })) {
        round_add_rows(model, acc + static_cast<size_t>(g) * ld, ld, C, ldc, nc, nr);
        return;
      }
      for (int r = g; r < g + nr; ++r)
        if (live[r]) round_add(model, acc + static_cast<size_t>(r) * ld, C + static_cast<size_t>(r - g) * ldc, nc);
    };
    bool packed = false;
    if constexpr (std::is_same_v<T, float>) {
      // the V planes refuse a chunk whose live P8 holds a NaN: the ordered loop takes it
      if (v_planes_ &&
          planes::pv_chunk(p8 + (c0 - j0), ldp, live, rows, c0, cn, *v_planes_, cbuf, d, planes::make_sink(add)))
        continue;  // rounded into acc group by group
      packed = (v_pack_ && fma::ordered_gemm(p8 + (c0 - j0), ldp, *v_pack_, c0, cn, 0, d, rows, cbuf, d));
    }
    if (!packed) ordered_gemm(p8 + (c0 - j0), ldp, vp_ + static_cast<size_t>(c0) * d, d, rows, d, cn, cbuf, d);
    add(0, rows, cbuf, d, d);
  }
}

}  // namespace attnum::attention
