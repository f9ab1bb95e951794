#pragma once
// The engine's row-level vector kernels: the wgmma row-sum order over a tile, the max fold and the
// fp16 accumulator's round-and-add. Chosen at run time through isa.h (ATTNUM_ISA controls them),
// compiled on every x86-64 build with target attributes. Each gives the bits of the engine's plain
// loop, which runs where the active path has no kernel (a false or 0 return).
namespace attnum::attention::rowk {

/// True when wgmma_rowsum_rows has a kernel on the active path.
bool has_wgmma_rowsum();
/// For each row r < rows with live[r]: the wgmma row-sum order (engine.cpp's add_rowsum) of
/// p[r * ldp + j], j < n, onto the four partials l[4 r .. 4 r + 3]. False (nothing done) when the
/// active path has no kernel.
bool wgmma_rowsum_rows(float* l, const float* p, int ldp, int rows, const char* live, int n);
/// *out = std::max folded over v[0..n) from init, except that a zero result's sign is not settled
/// (the caller reruns the plain fold when *out == 0). False when the active path has no kernel.
bool fold_max(const float* v, int n, float init, float* out);
/// a[i] = round_fp16(double(a[i]) + c[i]) (engine_detail.h) for i < k; returns k, a multiple of the
/// vector width (0 when the active path has no kernel): the caller does the rest.
int round_add_fp16(float* a, const double* c, int n);

}  // namespace attnum::attention::rowk
