#pragma once
// Runtime choice of the instruction set the engine's fast paths use (one binary for every x86-64
// CPU: the vector code carries __attribute__((target(...))) and runs only where the CPU and the OS
// support it; nothing needs -march).
//
//   amx     AMX-BF16/INT8 tiles for the exact FP8 chunk sums and INT8 QK (amx.h), AVX-512 elsewhere
//   avx512  AVX-512 F/DQ/BW/VL: int16-plane chunk GEMMs (plane_gemm.h) with double-FMA ones
//           (fma_gemm.h) for what they refuse, exp2f (fast_exp2.h)
//   avx2    AVX2 + FMA: the same kernels at 256 bits
//   neon    AArch64 Advanced SIMD: the int16-plane chunk GEMMs (vmlal_s16) and exp2f at 128 bits;
//           Eigen's double GEMMs for what the planes refuse (no double-FMA kernels)
//   scalar  no vector kernels: Eigen GEMMs and the plain loops (the reference the others match)
//
// amx, avx512 and avx2 exist on x86-64 only, neon on AArch64 only. Every path gives the same bits
// (tests/attention/isa_test.cpp runs each one the machine has against the scalar path and the preset oracles). The
// choice: ATTNUM_ISA=scalar|avx2|avx512|amx forces a path (ATTNUM_ISA=neon on ARM; one this CPU or OS lacks is refused:
// message on stderr, exit status 2); otherwise the best supported path, minus AMX when ATTNUM_NO_AMX is set (and not
// "0").
#include <atomic>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace attnum::attention::isa {

enum class path { scalar = 0, avx2 = 1, avx512 = 2, amx = 3, neon = 4 };

/// "scalar", "avx2", "avx512", "amx", "neon".
std::string_view name(path p);
/// Every path there is (on any CPU), scalar first.
const std::vector<path>& all_paths();
/// True when this build, the CPU and the OS can run p (checked once).
bool supported(path p);
/// The paths supported here, scalar first.
std::vector<path> supported_paths();
/// The path in use: set_active's, else ATTNUM_ISA's, else the best supported one.
path active();
/// Forces a supported path for this process (tests, A/B runs); fails on an unsupported one.
void set_active(path p);
/// True when the active path has at least p's vector unit (amx counts as avx512, avx512 as avx2;
/// every path as scalar; neon only as neon).
inline bool at_least(path p) {
  const path a = active();
  if (p == path::scalar) return true;
  if (a == path::neon || p == path::neon) return a == p;
  return static_cast<int>(a) >= static_cast<int>(p);
}

/// What gives the exact FP8 (E4M3 x E4M3) chunk sums on the active path: "amx-bf16",
/// "int16-planes-avx512", "int16-planes-avx2" (plane_gemm.h; the double-FMA kernels take what
/// they refuse), "int16-planes-neon" (Eigen's double GEMMs take what they refuse),
/// "double-fma-avx512", "double-fma-avx2" (ATTNUM_NO_PLANES) or "double-gemm" (Eigen: the
/// scalar path, neon with ATTNUM_NO_PLANES).
std::string_view fp8_sums();
/// What gives Sage's exact INT8 QK sums: "amx-int8", "vpmaddwd-avx512", "vpmaddwd-avx2",
/// "smlal-neon" (the plane kernels of plane_gemm.h) or "fp32-gemm" (Eigen, scalar path).
std::string_view int8_sums();
/// Dispatch counting, for tests that prove which code ran: while counting is on, every entry into
/// a hand-written vector kernel records (kernel, path), e.g. ("exp2f", avx512). Off by default;
/// then an entry costs one relaxed load. Kernels written as plain loops that the compiler
/// vectorises, and Eigen's GEMMs (vectorised for the build's -march), are not counted: they are
/// not chosen at run time.
void count_dispatches(bool on);
/// The entries recorded since counting was last switched on: (kernel, path) -> calls.
std::map<std::pair<std::string, path>, uint64_t> dispatches();
namespace detail {
extern std::atomic<bool> g_counting;
void record(const char* kernel, path p);
}  // namespace detail
/// Marks an entry into vector kernel `kernel` of path p (see count_dispatches).
inline void note(const char* kernel, path p) {
  if (detail::g_counting.load(std::memory_order_relaxed)) [[unlikely]]
    detail::record(kernel, p);
}

/// True when the environment variable name is set, non-empty and not "0" (the switches
/// ATTNUM_NO_AMX, ATTNUM_NO_PLANES).
bool env_set(const char* name);

}  // namespace attnum::attention::isa
