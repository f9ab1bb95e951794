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
//       plane 0: e in [ 1,  5]  (|x| >= 16)      plane 1: e in [-4, 0]  (0.5 <= |x| < 16)
//       plane 2: e in [-9, -5]  (|x| < 0.5)
//   A plane value is exact in bf16 (8 significant bits, fp32 exponent range). The product of a
//   plane-g and a plane-h value is a multiple of 2^L, L = lo_g + lo_h, below 2^(L + 16); lo_g + lo_h
//   depends only on s = g + h. So the tile products of the (at most three) plane pairs with the
//   same s, 32 products each, are multiples of 2^L whose every partial sum is below
//   3 * 32 * 2^(L+16) < 2^(L+24): exactly representable in fp32 (and far from fp32 subnormals,
//   since L >= -18). Any order of fp32 additions, with any rounding mode, is then exact, so the
//   tile's fp32 accumulator D_s holds the exact sum of its pairs, whatever order TDPBF16PS uses.
//   The chunk sum is D_0 + ... + D_4, added in double (exact: every value is a multiple of 2^-18
//   below 2^26). Results are bit-identical to the double GEMM; tests compare both paths.
//
// available() is false when the CPU or the OS lacks AMX, when the library was built without it,
// or when ATTNUM_NO_AMX is set in the environment (or set_enabled(false) was called): the engine
// then runs its double-GEMM path.
#include <cstddef>
#include <cstdint>
#include <new>
#include <vector>

#include "attnum/attention/kernel_spec.h"

namespace attnum::attention::amx {

/// Cache-line aligned storage: a tile row that straddles two lines loads several times slower.
template <typename T>
struct line_allocator {
  using value_type = T;
  line_allocator() = default;
  template <typename U>
  line_allocator(const line_allocator<U>&) {}
  T* allocate(size_t n) { return static_cast<T*>(::operator new(n * sizeof(T), std::align_val_t{64})); }
  void deallocate(T* p, size_t) { ::operator delete(p, std::align_val_t{64}); }
  bool operator==(const line_allocator&) const { return true; }
};
using plane = std::vector<uint16_t, line_allocator<uint16_t>>;

/// True when the exact tile path can run here (checked once; see the file comment).
bool available();
/// Turns the tile path off (or back on, where available) for this process: for tests and A/B runs.
void set_enabled(bool on);

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
  /// whose keys are all masked for all its rows is set to 0 instead (pass a huge offset otherwise).
  void run(int r0, int rows, int j0, int n, const accumulator_spec& model, double* acc, int ld,
           long causal_off) const;

 private:
  int d_ = 0, dp_ = 0, n_q_ = 0, n_kv_ = 0;
  plane q_[3];    // [n_q padded to 16][dp_] row-major
  plane k_[3];    // [n_kv/16][dp_/2][16][2] VNNI pairs
  std::vector<uint8_t> qmask_, kmask_;  // plane occupancy per (16-row tile, 32 chunk)
  sparse_plane qs_;                     // plane 2 of Q by (16-row tile, 32 chunk), when sparse
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
  int d_ = 0, n_kv_ = 0, n_pad_ = 0;
  plane v_[3];   // [n_pad_/2][d_][2] VNNI pairs of keys
  std::vector<uint8_t> vmask_;   // plane occupancy per (32-key chunk, 16-channel tile)
  const float* v_src_ = nullptr;  // the caller's V (P2 V corrections read its rows)
};

}  // namespace attnum::attention::amx
