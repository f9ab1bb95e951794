// See isa.h.
#include "attnum/attention/isa.h"
#include "attnum/attention/plane_gemm.h"

#include <atomic>
#include <mutex>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "attnum/attention/amx.h"
#include "attnum/attention/simd_target.h"
#include "attnum/core/error.h"

#if defined(__x86_64__)
#include <cpuid.h>
#endif

namespace attnum::attention::isa {
namespace {

#if defined(__x86_64__)
// XCR0: which register states the OS saves on a context switch.
unsigned long long xcr0() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 27))) return 0;  // OSXSAVE
  unsigned lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (static_cast<unsigned long long>(hi) << 32) | lo;
}

bool has_avx2() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return false;
  const bool fma = c & (1u << 12), avx = c & (1u << 28);
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
  const bool avx2 = b & (1u << 5);
  return fma && avx && avx2 && (xcr0() & 0x6) == 0x6;  // SSE and YMM state
}

bool has_avx512() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!has_avx2() || !__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
  const bool fdqbwvl = (b & (1u << 16)) && (b & (1u << 17)) && (b & (1u << 30)) && (b & (1u << 31));
  return fdqbwvl && (xcr0() & 0xE6) == 0xE6;  // opmask, ZMM_Hi256, Hi16_ZMM
}
#endif

bool detect(path p) {
  switch (p) {
    case path::scalar:
      return true;
#if defined(__x86_64__)
    case path::avx2:
      return has_avx2();
    case path::avx512:
      return has_avx512();
    case path::amx:
      return has_avx512() && amx::hardware();
    case path::neon:
      return false;
#elif defined(__aarch64__) && ATTNUM_NEON_KERNELS
    case path::neon:
      return true;  // Advanced SIMD is part of every AArch64 CPU
    default:
      return false;
#else
    default:
      return false;
#endif
  }
  return false;
}

path from_env() {
  const char* e = std::getenv("ATTNUM_ISA");
  if (e && *e) {
    for (path p : all_paths())
      if (name(p) == e) {
        if (!supported(p)) {
          std::fprintf(stderr, "error: ATTNUM_ISA=%s: this CPU (or its OS) has no %s; supported here:", e, e);
          for (path q : supported_paths()) std::fprintf(stderr, " %s", std::string(name(q)).c_str());
          std::fprintf(stderr, "\n");
          std::exit(2);
        }
        return p;
      }
    std::string known;
    for (path p : all_paths()) known += (known.empty() ? "" : ", ") + std::string(name(p));
    std::fprintf(stderr, "error: ATTNUM_ISA=%s: expected one of %s\n", e, known.c_str());
    std::exit(2);
  }
  const bool no_amx = env_set("ATTNUM_NO_AMX");
  for (path p : {path::amx, path::avx512, path::avx2, path::neon})
    if (supported(p) && !(p == path::amx && no_amx)) return p;
  return path::scalar;
}

std::atomic<int> g_forced{-1};

}  // namespace

const std::vector<path>& all_paths() {
  static const std::vector<path> v = {path::scalar, path::avx2, path::avx512, path::amx, path::neon};
  return v;
}

std::string_view name(path p) {
  switch (p) {
    case path::scalar:
      return "scalar";
    case path::avx2:
      return "avx2";
    case path::avx512:
      return "avx512";
    case path::amx:
      return "amx";
    case path::neon:
      return "neon";
  }
  return "?";
}

bool supported(path p) {
  static const bool ok[5] = {detect(path::scalar), detect(path::avx2), detect(path::avx512), detect(path::amx),
                             detect(path::neon)};
  return ok[static_cast<int>(p)];
}

std::vector<path> supported_paths() {
  std::vector<path> v;
  for (path p : all_paths())
    if (supported(p)) v.push_back(p);
  return v;
}

path active() {
  const int f = g_forced.load(std::memory_order_relaxed);
  if (f >= 0) return static_cast<path>(f);
  static const path chosen = from_env();
  return chosen;
}

bool env_set(const char* name) {
  const char* e = std::getenv(name);
  return e && *e && std::strcmp(e, "0") != 0;
}

std::string_view fp8_sums() {
  if (amx::available()) return "amx-bf16";
  const bool pl = planes::enabled();
  switch (active()) {
    case path::avx2:
      return pl ? "int16-planes-avx2" : "double-fma-avx2";
    case path::avx512:
    case path::amx:
      return pl ? "int16-planes-avx512" : "double-fma-avx512";  // amx with the tiles switched off
    case path::neon:
      return pl ? "int16-planes-neon" : "double-gemm";
    case path::scalar:
      break;
  }
  return "double-gemm";
}

std::string_view int8_sums() {
  if (amx::available()) return "amx-int8";
  if (at_least(path::avx512)) return "vpmaddwd-avx512";
  if (at_least(path::avx2)) return "vpmaddwd-avx2";
  if (at_least(path::neon)) return "smlal-neon";
  return "fp32-gemm";
}

namespace detail {
std::atomic<bool> g_counting{false};
}  // namespace detail

namespace {
std::mutex g_count_mutex;
std::map<std::pair<std::string, path>, uint64_t> g_counts;
}  // namespace

void count_dispatches(bool on) {
  std::lock_guard lock(g_count_mutex);
  if (on) g_counts.clear();
  detail::g_counting.store(on, std::memory_order_relaxed);
}

std::map<std::pair<std::string, path>, uint64_t> dispatches() {
  std::lock_guard lock(g_count_mutex);
  return g_counts;
}

void detail::record(const char* kernel, path p) {
  std::lock_guard lock(g_count_mutex);
  ++g_counts[{kernel, p}];
}

void set_active(path p) {
  if (!supported(p)) fail("isa: path {} is not supported on this machine", name(p));
  g_forced.store(static_cast<int>(p), std::memory_order_relaxed);
}

}  // namespace attnum::attention::isa
