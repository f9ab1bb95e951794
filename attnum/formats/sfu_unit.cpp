// The measured SFU tables: rules and file format (sfu_unit.h). Standard C++ only, so that the
// probe kit (gpu/, compiled by nvcc's host compiler without the library's dependencies) writes
// its tables with this same code: built there with ATTNUM_SFU_STANDALONE, errors are
// std::runtime_error; in the library they are attnum::error (exit 2 in the CLI), and a table is
// read through attnum::read_file (regular files only, never blocking, bounded).
#include "attnum/formats/sfu_unit.h"

#include <bit>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <sstream>
#include <stdexcept>

#ifndef ATTNUM_SFU_STANDALONE
#include "attnum/core/error.h"
#include "attnum/core/file.h"
#endif

namespace attnum::formats {
namespace {

[[noreturn]] void raise(const std::string& msg) {
#ifdef ATTNUM_SFU_STANDALONE
  throw std::runtime_error(msg);
#else
  throw attnum::error(msg);
#endif
}

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr double kMinNormal = 0x1p-126;

inline float ftz(float x) { return std::fabs(x) < 0x1p-126f ? std::copysign(0.0f, x) : x; }

// y * 2^n for a finite y > 0 (n clamped: beyond it the result is 0 or inf anyway), flushed.
inline float scale_flush(double y, double n, bool negative) {
  const int e = static_cast<int>(std::fmax(-400.0, std::fmin(400.0, n)));
  const double v = std::ldexp(y, e);
  float r;
  if (v >= 0x1p128)
    r = INFINITY;
  else if (v < kMinNormal)
    r = 0.0f;
  else
    r = static_cast<float>(v);  // exact: y is a float and v normal
  return negative ? -r : r;
}

}  // namespace

const char* sfu_kind_name(sfu_kind k) {
  switch (k) {
    case sfu_kind::ex2:
      return "ex2";
    case sfu_kind::rcp:
      return "rcp";
    case sfu_kind::div:
      return "div";
  }
  return "?";
}

const char* sfu_rule_name(sfu_rule r) {
  switch (r) {
    case sfu_rule::ex2_frac:
      return "ex2_frac";
    case sfu_rule::rcp_mant:
      return "rcp_mant";
    case sfu_rule::div_mul_rcp:
      return "div_mul_rcp";
    case sfu_rule::div_ieee:
      return "div_ieee";
  }
  return "?";
}

float sfu_table::ex2(float x) const {
  x = ftz(x);
  if (std::isnan(x)) return kNaN;
  if (std::isinf(x)) return x > 0 ? INFINITY : 0.0f;
  const double n = std::floor(static_cast<double>(x));
  // The top `bits` bits of frac(x), exactly: floor(x * 2^bits) - n * 2^bits. (x - n in double rounds
  // to 1 for a tiny negative x, one past the table.)
  const auto i = static_cast<size_t>(std::floor(std::ldexp(static_cast<double>(x), bits)) - std::ldexp(n, bits));
  return scale_flush(static_cast<double>(std::bit_cast<float>(entries[i])), n, false);
}

float sfu_table::rcp(float x) const {
  x = ftz(x);
  if (std::isnan(x)) return kNaN;
  if (x == 0) return std::copysign(INFINITY, x);
  if (std::isinf(x)) return std::copysign(0.0f, x);
  const uint32_t u = std::bit_cast<uint32_t>(x);
  const int e = static_cast<int>((u >> 23) & 0xFF) - 127;
  const uint32_t i = (u & 0x7FFFFF) >> (23 - bits);
  return scale_flush(static_cast<double>(std::bit_cast<float>(entries[i])), -e, std::signbit(x));
}

float sfu_table::div(float a, float b) const {
  if (rule == sfu_rule::div_ieee) return a / b;
  const float r = static_cast<float>(static_cast<double>(ftz(a)) * static_cast<double>(rcp(b)));
  // (a float product rounded once: the double product of two floats is exact)
  return ftz(r);
}

std::string sfu_table::check() const {
  const bool div_rule = rule == sfu_rule::div_mul_rcp || rule == sfu_rule::div_ieee;
  if ((kind == sfu_kind::ex2) != (rule == sfu_rule::ex2_frac) ||
      (kind == sfu_kind::rcp) != (rule == sfu_rule::rcp_mant) || (kind == sfu_kind::div) != div_rule)
    return std::string("rule ") + sfu_rule_name(rule) + " does not describe unit " + sfu_kind_name(kind);
  if (rule == sfu_rule::div_ieee) {
    if (bits != 0 || !entries.empty()) return "rule div_ieee takes bits 0 and no entries";
    return "";
  }
  if (bits < 0 || bits > 23) return "bits " + std::to_string(bits) + " out of range [0, 23]";
  if (entries.size() != (size_t{1} << bits))
    return "entries: " + std::to_string(entries.size()) +
           " values, expected 2^bits = " + std::to_string(size_t{1} << bits);
  // ex2 entries are significands in [0.5, 2]; rcp entries in [0.5, 1]: anything else is not a table
  // of this rule (and would break the exactness of the scaling).
  const float lo = 0.5f, hi = rule == sfu_rule::ex2_frac ? 2.0f : 1.0f;
  for (size_t i = 0; i < entries.size(); ++i) {
    const float v = std::bit_cast<float>(entries[i]);
    if (!(v >= lo && v <= hi)) {
      char buf[96];
      std::snprintf(buf, sizeof buf, "entry %zu (%08x = %g) outside [%g, %g]", i, entries[i], static_cast<double>(v),
                    static_cast<double>(lo), static_cast<double>(hi));
      return buf;
    }
  }
  return "";
}

std::shared_ptr<const sfu_table> read_sfu_table(const std::string& path, sfu_kind expect) {
#ifndef ATTNUM_SFU_STANDALONE
  // regular files only, opened without blocking, bounded: a FIFO or /dev/zero is refused at once
  std::istringstream in(read_file(path, kMaxJsonBytes));
  auto shown = [](const std::string& s) { return clip(s); };  // at most ~200 bytes in a message
#else
  std::ifstream in(path);
  if (!in) raise("sfu table " + path + ": cannot open for reading");
  auto shown = [](const std::string& s) { return s; };
#endif
  auto t = std::make_shared<sfu_table>();
  std::string line;
  int lineno = 0;
  auto bad = [&](const std::string& what) -> void {
    raise("sfu table " + path + ": line " + std::to_string(lineno) + ": " + what);
  };
  auto next = [&]() -> bool {
    if (!std::getline(in, line)) return false;
    ++lineno;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    return true;
  };
  if (!next() || line != "attnum-sfu-table 1") bad("expected the header 'attnum-sfu-table 1'");
  bool have_unit = false, have_rule = false, have_bits = false;
  long long n_entries = -1;
  while (true) {
    if (!next()) bad("missing 'data'");
    if (line == "data") break;
    const auto sp = line.find(' ');
    const std::string key = line.substr(0, sp), val = sp == std::string::npos ? "" : line.substr(sp + 1);
    if (key == "unit") {
      if (val == "ex2")
        t->kind = sfu_kind::ex2;
      else if (val == "rcp")
        t->kind = sfu_kind::rcp;
      else if (val == "div")
        t->kind = sfu_kind::div;
      else
        bad("unit: '" + shown(val) + "' (expected ex2, rcp or div)");
      have_unit = true;
    } else if (key == "rule") {
      if (val == "ex2_frac")
        t->rule = sfu_rule::ex2_frac;
      else if (val == "rcp_mant")
        t->rule = sfu_rule::rcp_mant;
      else if (val == "div_mul_rcp")
        t->rule = sfu_rule::div_mul_rcp;
      else if (val == "div_ieee")
        t->rule = sfu_rule::div_ieee;
      else
        bad("rule: '" + shown(val) + "' (expected ex2_frac, rcp_mant, div_mul_rcp or div_ieee)");
      have_rule = true;
    } else if (key == "bits" || key == "entries") {
      char* end = nullptr;
      const long long v = std::strtoll(val.c_str(), &end, 10);
      if (val.empty() || *end != '\0' || v < 0 || v > (1 << 23))
        bad(key + ": '" + shown(val) + "' is not an integer in [0, 2^23]");
      if (key == "bits")
        t->bits = static_cast<int>(v), have_bits = true;
      else
        n_entries = v;
    } else if (key == "note") {
      t->notes.push_back(val);
    } else {
      bad("unknown field '" + shown(key) + "' (expected unit, rule, bits, entries, note or data)");
    }
  }
  if (!have_unit || !have_rule || !have_bits || n_entries < 0)
    bad("the header needs unit, rule, bits and entries before data");
  t->entries.reserve(static_cast<size_t>(n_entries));
  for (long long i = 0; i < n_entries; ++i) {
    if (!next()) bad("data: " + std::to_string(i) + " entries, expected " + std::to_string(n_entries));
    char* end = nullptr;
    const unsigned long v = std::strtoul(line.c_str(), &end, 16);
    if (line.size() != 8 || *end != '\0') bad("data: '" + shown(line) + "' is not 8 hex digits");
    t->entries.push_back(static_cast<uint32_t>(v));
  }
  if (!next() || line != "end") bad("expected 'end' after " + std::to_string(n_entries) + " entries");
  if (const std::string e = t->check(); !e.empty()) raise("sfu table " + path + ": " + e);
  if (t->kind != expect)
    raise("sfu table " + path + ": unit " + sfu_kind_name(t->kind) + ", expected a " + sfu_kind_name(expect) +
          " table");
  return t;
}

void write_sfu_table(const std::string& path, const sfu_table& t) {
  if (const std::string e = t.check(); !e.empty()) raise("sfu table " + path + ": not written: " + e);
  std::ostringstream o;
  o << "attnum-sfu-table 1\nunit " << sfu_kind_name(t.kind) << "\nrule " << sfu_rule_name(t.rule) << "\nbits " << t.bits
    << "\nentries " << t.entries.size() << "\n";
  for (const auto& n : t.notes) {
    if (n.find('\n') != std::string::npos) raise("sfu table " + path + ": a note holds a newline");
    o << "note " << n << "\n";
  }
  o << "data\n";
  char buf[16];
  for (uint32_t v : t.entries) {
    std::snprintf(buf, sizeof buf, "%08x\n", v);
    o << buf;
  }
  o << "end\n";
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << o.str();
    out.flush();
    if (!out) {
      std::remove(tmp.c_str());
      raise("sfu table " + path + ": cannot write " + tmp);
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    raise("sfu table " + path + ": cannot rename " + tmp + " to it");
  }
}

}  // namespace attnum::formats
