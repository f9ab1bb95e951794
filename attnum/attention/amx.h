#pragma once
// Exact E4M3 x E4M3 chunk sums on Intel AMX-BF16 tiles (Sapphire Rapids and later).
//
// The engine needs, for every k_step = 32 chunk of a dot product of E4M3 grid values, the EXACT
// chunk sum (it then rounds acc + sum once, as the accumulator model says). A double GEMM gives
// it (every product and partial sum is exact in double) at the fp64 rate. This file gets the same
// sums from bf16 tiles at a far higher rate:
//
//   Every E4M3 value is m * 2^e with integer |m| <= 15 and lsb exponent e in [-9, 5]. Split each
//   operand into three planes by e, every element in exactly one plane:
//       plane 0: e in [ 0, 5]  (8 <= |x| <= 448)   multiples of 1,     |x| <= 448
//       plane 1: e in [-6, -1] (1/8 <= |x| < 8)    multiples of 2^-6,  |x| <= 7.5
//       plane 2: e in [-9, -7] (|x| < 1/8)         multiples of 2^-9,  |x| <= 0.1171875
//   A plane value is exact in bf16 (8 significant bits, fp32 exponent range). The plane pairs go
//   to five tile accumulators; within each, every product is a multiple of 2^L and the sum of the
//   absolute values of its (at most 96) products of a 32-long chunk stays below 2^(L + 24):
//       D0 {00}:          L =   0,  32 * 448 * 448                        = 6422528  < 2^24
//       D1 {01, 10}:      L =  -6,  64 * 448 * 7.5                        = 215040   < 2^18
//       D2 {11}:          L = -12,  32 * 7.5 * 7.5                        = 1800     < 2^12
//       D3 {02, 20}:      L =  -9,  64 * 448 * 0.1171875                  = 3360     < 2^15
//       D4 {12, 21, 22}:  L = -18,  64 * 7.5 * 0.1171875 + 32 * 0.1171875^2 = 56.7   < 2^6
//   So every partial sum, in any order, is exactly representable in fp32 (and far from fp32
//   subnormals): whatever order and rounding TDPBF16PS uses, D_s is the exact sum of its pairs.
//   The chunk sum is D0 + ... + D4, added in double (exact: multiples of 2^-18 below 2^26).
//   Results are bit-identical to the double GEMM; tests compare both paths. Planes 0 and 1 cover
//   12 binades, so on typical data plane 2 is rare and most tiles need only D0-D2.
//
// available() is false when the CPU or the OS lacks AMX (TILE, BF16 and INT8), when the library
// was built without it, or when the runtime dispatch (isa.h) chose another path (ATTNUM_ISA,
// ATTNUM_NO_AMX) or set_enabled(false) was called: the engine then runs the double-FMA chunk
// GEMMs of fma_gemm.h (AVX-512 / AVX2) or its scalar paths, same bits.
#include <cstddef>
#include <cstdint>
#include <new>
#include <vector>

#include "attnum/attention/causal.h"
#include "attnum/attention/kernel_spec.h"

namespace attnum::attention::amx {

/// Cache-line aligned storage: a tile row that straddles two lines loads several times slower.
template <typename T>
struct line_allocator {
  using value_type = T;
  line_allocator() = default;
  template <typename U>
  line_allocator(const line_allocator<U>&) {}
  T* allocate(size_t n) { return static_cast<T*>(::operator new (n * sizeof(T), std::align_val_t{64})); }
  void deallocate(T* p, size_t) { ::operator delete (p, std::align_val_t{64}); }
  bool operator==(const line_allocator&) const { return true; }
};
using plane = std::vector<uint16_t, line_allocator<uint16_t>>;

/// True when the CPU and the OS can run the tile path (AMX TILE, BF16, INT8; checked once).
bool hardware();
/// True when the tile path runs: hardware(), chosen by isa::active(), not set_enabled(false).
bool available();
/// Turns the tile path off (or back on, where available) for this process: for tests and A/B runs.
void set_enabled(bool on);
/// Number of exact_qk / exact_pv runs so far in this process (a diagnostic: is the path in use?).
uint64_t run_count();

/// The elements of the small-value plane (plane 2) of an operand, by (tile, chunk), when they are
/// few: they are then added in double outside the tiles, which saves two of the five diagonals
/// and most of the tile products on typical per-tensor scaled data.
struct sparse_plane {
  struct entry {
    uint8_t a, b;  ///< row (or key) in the tile, k (or column) in the chunk
    float v;
  };
  bool on = false;
  std::vector<uint32_t> off;  ///< entries of bucket i: [off[i], off[i + 1])
  std::vector<entry> e;
};

/// Q K^T chunk sums for one head: Q [n_q, d] and K [n_kv, d] hold E4M3 grid values (|x| <= 448).
class exact_qk {
 public:
  /// Returns false (and builds nothing) when a value is not an E4M3 grid value.
  bool build(const float* q, int n_q, const float* k, int n_kv, int d);
  /// For rows [r0, r0 + rows) and keys [j0, j0 + n): acc[r * ld + j] starts at +0 (it is not
  /// read) and takes, for each chunk of 32 along d in order, model(acc + exact chunk sum). r0 and
  /// j0 must be multiples of 16. Causal: a key j > row + causal_off is masked, so a 16 x 16 tile
  /// whose keys are all masked for all its rows is set to 0 instead (kNoMask: no mask, causal.h).
  void run(int r0, int rows, int j0, int n, const accumulator_spec& model, double* acc, int ld, long causal_off) const;
  /// Same into fp32 accumulators: only for the fp32 and truncated models (their values are floats).
  void run(int r0, int rows, int j0, int n, const accumulator_spec& model, float* acc, int ld, long causal_off) const;

 private:
  template <typename Acc>
  void run_t(int r0, int rows, int j0, int n, const accumulator_spec& model, Acc* acc, int ld, long causal_off) const;
  int dp_ = 0;
  plane q_[3];                          // [n_q padded to 16][dp_] row-major
  plane k_[3];                          // [n_kv/16][dp_/2][16][2] VNNI pairs
  std::vector<uint8_t> qmask_, kmask_;  // plane occupancy per (16-row tile, 32 chunk)
  sparse_plane qs_;                     // plane 2 of Q by (16-row tile, 32 chunk), when sparse
};

/// Q K^T for INT8 operands (Sage's QK): exact int32 sums over all of d (|sum| <= d * 2^14 < 2^31
/// for d < 2^17) on AMX-INT8 tiles (TDPBSSD), 64 products per tile step.
class int8_qk {
 public:
  /// q [n_q, d], k [n_kv, d] hold integers in [-128, 127] (as floats); false otherwise.
  bool build(const float* q, int n_q, const float* k, int n_kv, int d);
  /// acc[r * ld + j] = exact sum over d of Q[r0 + r] K[j0 + j] (as a double), for r < rows and
  /// j < n; r0 and j0 must be multiples of 16. Causal skip as in exact_qk::run (skipped tiles: 0).
  void run(int r0, int rows, int j0, int n, double* acc, int ld, long causal_off) const;

 private:
  int dp_ = 0;
  std::vector<int8_t, line_allocator<int8_t>> q_;  // [n_q padded to 16][dp_] row-major
  std::vector<int8_t, line_allocator<int8_t>> k_;  // [n_kv/16][dp_/4][16][4] VNNI quads
};

/// P V chunk sums for one head: V [n_kv, d] holds E4M3 grid values (d a multiple of 16).
class exact_pv {
 public:
  /// v must stay valid while run() is used.
  bool build(const float* v, int n_kv, int d);
  /// For the rows r < rows with live[r]: for each chunk of 32 keys from j0 in order,
  /// acc[r * ld + k] = model(acc + exact sum over the chunk of p8[r * ldp + j] * V[j0 + j][k]),
  /// j in [0, n). p8 holds E4M3 grid values; j0 must be a multiple of 32. Returns false, and
  /// changes nothing, when p8 holds a NaN (the caller then takes its ordered path).
  bool run(const float* p8, int ldp, int rows, const char* live, int j0, int n, const accumulator_spec& model,
           float* acc, int ld) const;

 private:
  int d_ = 0;
  plane v_[3];                    // [n_kv padded to 32, /2][d_][2] VNNI pairs of keys
  std::vector<uint8_t> vmask_;    // plane occupancy per (32-key chunk, 16-channel tile)
  const float* v_src_ = nullptr;  // the caller's V (P2 V corrections read its rows)
};

}  // namespace attnum::attention::amx
