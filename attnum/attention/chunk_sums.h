#pragma once
// The chunk sums of the engine's two products, S = Q K^T and P8 V, for one head: which kernel
// gives them is chosen once per head (qk_sums::make, pv_sums::make) from the active ISA path
// (isa.h) and the head's operands, and the choice owns what it packs (the planes and panels live
// in the building thread's thread-local storage, reused from head to head). engine.cpp keeps the
// numerics around them (scaling, softmax, casts, the epilogue); every backend rounds each chunk's
// sum into the caller's accumulators through the accumulator model (round_add, engine_detail.h,
// or the same rounding fused into a kernel's epilogue), so the accumulator bits do not depend on
// the backend.
//
// Exact-GEMM paths: where every product and every chunk sum is exact in double (E4M3 x E4M3:
// 8-bit products in [2^-18, 2^17.6], 32 of them need < 42 bits; INT8 x INT8), any summation
// order gives the same chunk sums, so Eigen's blocked GEMM, the AMX tiles (amx.h), the int16
// planes (plane_gemm.h) and the double-FMA kernels (fma_gemm.h) are bit-identical to the plain
// ascending loop. Elsewhere (the ordered presets: bf16, fp32 operands, ...) the chunk sum is
// defined as the ascending double sum, which the ordered loop and the double-FMA kernels give.
#include <string_view>
#include <vector>

#include "attnum/attention/kernel_spec.h"

namespace attnum::attention {

struct prepared_layer;
namespace amx {
class exact_qk;
class exact_pv;
class int8_qk;
}  // namespace amx
namespace fma {
struct packed_a;
struct packed_b;
struct packed_i8_a;
struct packed_i8_b;
}  // namespace fma
namespace planes {
struct plane_a;
struct plane_b;
}  // namespace planes

/// Scratch of the backends for one thread (kept in the engine's tile buffer).
struct chunk_scratch {
  std::vector<double> c;   ///< one chunk's sums of a tile, [rows, n] (QK) or [rows, d] (PV)
  std::vector<double> pm;  ///< P8 of a tile as doubles (PV eigen_double)
  std::vector<float> cf;   ///< fp32 GEMM results (QK int8_fp32_gemm)
};

/// What gives a head's QK chunk sums, named for what runs.
enum class qk_kind {
  amx_bf16,        ///< exact E4M3 chunk sums on AMX-BF16 tiles (amx.h)
  amx_int8,        ///< Sage's INT8 QK: exact int32 sums over all of d on AMX-INT8 tiles (amx.h)
  int16_planes,    ///< exact E4M3 chunk sums on int16 exponent planes (plane_gemm.h), Q and K split once
  double_fma,      ///< ascending double sums on the double-FMA kernels, Q and K packed once (fma_gemm.h)
  ordered_loop,    ///< ascending double sums over K transposed (the unpacked double-FMA kernels where the
                   ///< path has them, else the plain loop: the scalar reference)
  eigen_double,    ///< Eigen's double GEMM per chunk (exact sums only: E4M3 with k_step <= 32, INT8)
  int8_vpmaddwd,   ///< Sage's INT8 QK: exact integer pair products, Q and K packed once (fma_gemm.h)
  int8_fp32_gemm,  ///< the same sums unpacked: the pair kernels where the path has them, else Eigen's
                   ///< fp32 GEMM (exact: integer sums below 2^24)
};

/// What gives a head's PV chunk sums, named for what runs.
enum class pv_kind {
  amx_bf16,      ///< exact E4M3 chunk sums on AMX-BF16 tiles; a block whose P8 holds a NaN: ordered loop
  int16_planes,  ///< exact E4M3 chunk sums on V's int16 planes; a chunk they refuse: ordered loop
  double_fma,    ///< ascending double sums on the double-FMA kernels, V packed once
  ordered_loop,  ///< ascending double sums (the unpacked double-FMA kernels where the path has them)
  eigen_double,  ///< Eigen's double GEMM per chunk (exact sums only: E4M3 P8 and V, k_step <= 32)
};

/// The kinds' names as written above (run_stats reports the kinds each head ran).
std::string_view name(qk_kind k);
std::string_view name(pv_kind k);

/// S = Q K^T of one head through its accumulator model.
class qk_sums {
 public:
  /// Chooses and builds the backend of query head h of L. s: the effective spec (disabled points
  /// resolved; its qk_acc is the model run() is given); row_tile: run() is called for rows
  /// starting at multiples of it; bn: the key block width (j0 a multiple of it). Every kind serves
  /// the float engine and the fp64 presets alike (x is for the float engine only).
  static qk_sums make(const prepared_layer& L, int h, const kernel_spec& s, int row_tile, int bn);
  qk_kind kind() const { return kind_; }
  /// True when run() can round fp32 / truncated accumulators straight into float scores (x).
  bool float_scores() const {
    return kind_ == qk_kind::amx_bf16 || kind_ == qk_kind::int16_planes || kind_ == qk_kind::double_fma;
  }
  /// For rows [r0, r0 + rows) and keys [j0, j0 + n), n > 0: acc(r, j) = the model over d's
  /// chunks (the first from +0, each chunk's sum added and rounded once; int32: one exact sum
  /// over all of d, left for the caller to convert), acc(r, j) at x[r * ld + j] when x is set
  /// (fp32 and truncated models, float_scores()), else at sacc[r * ld + j]. Key j is masked for
  /// row r0 + r when j > r0 + r + causal_off (kNoMask: none, causal.h): a masked score may be
  /// left unwritten (the caller gives every masked score the mask value before reading it).
  void run(int r0, int rows, int j0, int n, long causal_off, const accumulator_spec& model, double* sacc, float* x,
           int ld, chunk_scratch& s) const;

 private:
  qk_kind kind_ = qk_kind::ordered_loop;
  int d_ = 0, n_kv_ = 0;
  const float* q8_ = nullptr;  // [n_q, d] cast Q of the head
  const float* k8_ = nullptr;  // [n_kv, d] cast K of its kv group
  // The packed operands of the chosen kind (the building thread's thread-local storage).
  amx::exact_qk* amx_ = nullptr;
  amx::int8_qk* amx_i8_ = nullptr;
  const planes::plane_a* q_planes_ = nullptr;
  const planes::plane_b* k_planes_ = nullptr;
  const fma::packed_a* q_pack_ = nullptr;  // Q as doubles beside k_pack_ (once per head, not per call)
  const fma::packed_b* k_pack_ = nullptr;  // B = K^T in the double kernels' panels
  const fma::packed_i8_a* q_i8_ = nullptr;
  const fma::packed_i8_b* k_i8_ = nullptr;
  std::vector<float> kT_;        // ordered_loop: [d, n_kv] K transposed (vectorised over keys)
  std::vector<double> qd_, kd_;  // eigen_double: [n_q, d], [n_kv, d] the cast values as double
};

/// O (or a fresh accumulator) += P8 V of one head through its accumulator model.
class pv_sums {
 public:
  /// Chooses and builds the backend of kv head g of L. vp: [n_kv, d] the V fed to PV (the cast
  /// values, or V dequantised), valid while the backend is used; uniform: V's scale is constant
  /// over tokens (vp holds the cast values); s, bn as for qk_sums::make; fp32: the engine runs in
  /// float (the fp64 presets have only eigen_double and ordered_loop).
  static pv_sums make(const prepared_layer& L, int g, const kernel_spec& s, int bn, const float* vp, bool uniform,
                      bool fp32);
  pv_kind kind() const { return kind_; }
  /// For the rows r < rows with live[r]: for each chunk of model.k_step keys from j0 in order,
  /// acc[r * ld + k] = model(acc + sum over the chunk of p8[r * ldp + j] * V[j0 + j][k]), j in
  /// [0, n). p_end (may be null): row r's P8 is +-0 from column p_end[r] on and V is finite (0 for
  /// a row that is not live), so its products there may be skipped.
  void run(const float* p8, int ldp, int rows, const char* live, int j0, int n, const accumulator_spec& model,
           float* acc, int ld, const int* p_end, chunk_scratch& s) const;
  /// The fp64 presets' accumulators (eigen_double or ordered_loop).
  void run(const double* p8, int ldp, int rows, const char* live, int j0, int n, const accumulator_spec& model,
           double* acc, int ld, const int* p_end, chunk_scratch& s) const;

 private:
  template <typename T>
  void run_t(const T* p8, int ldp, int rows, const char* live, int j0, int n, const accumulator_spec& model, T* acc,
             int ld, const int* p_end, chunk_scratch& s) const;
  pv_kind kind_ = pv_kind::ordered_loop;
  int d_ = 0;
  const float* vp_ = nullptr;
  amx::exact_pv* amx_ = nullptr;
  const planes::plane_b* v_planes_ = nullptr;
  const fma::packed_b* v_pack_ = nullptr;
  std::vector<double> vd_;  // eigen_double: [n_kv, d] V as double
};

}  // namespace attnum::attention
