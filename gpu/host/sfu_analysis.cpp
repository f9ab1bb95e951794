// SFU analysis (sfu_analysis.h). Standard C++ and std::thread only: built by g++ for the
// self-test and by nvcc's host compiler into the probes.
#include "gpu/host/sfu_analysis.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <mutex>
#include <thread>

namespace attnum::gpu {
namespace {

constexpr size_t kChunk = size_t{1} << 22;  // inputs per evaluation call

uint32_t fbits(float x) { return std::bit_cast<uint32_t>(x); }
float ffrom(uint32_t u) { return std::bit_cast<float>(u); }
float ftz(float x) { return std::fabs(x) < 0x1p-126f ? std::copysign(0.0f, x) : x; }

// Basis: the unit on x = 1 + i 2^-23, i < 2^23, its outputs scaled by `scale` (exact: powers of 2).
std::vector<uint32_t> basis(const unary_eval& unit, float scale) {
  const size_t n = size_t{1} << 23;
  std::vector<uint32_t> in(n), out(n);
  for (size_t i = 0; i < n; ++i) in[i] = 0x3F800000u | static_cast<uint32_t>(i);
  for (size_t i = 0; i < n; i += kChunk) unit(in.data() + i, out.data() + i, std::min(kChunk, n - i));
  for (auto& o : out) o = fbits(ffrom(o) * scale);
  return out;
}

// Smallest k such that g is constant on runs of 2^(23-k) entries (23 always holds).
int smallest_k(const std::vector<uint32_t>& g) {
  for (int k = 0; k < 23; ++k) {
    const size_t run = size_t{1} << (23 - k);
    bool ok = true;
    for (size_t i = 0; i < g.size() && ok; ++i) ok = g[i] == g[i - i % run];
    if (ok) return k;
  }
  return 23;
}

// Compares unit and model over the domain (plus nothing else), in chunks on `threads` threads.
hypothesis_result verify_unary(const std::string& name, const unary_eval& unit,
                               const std::function<uint32_t(uint32_t)>& model, const unary_domain& dom) {
  hypothesis_result r;
  r.name = name;
  const uint64_t total = (uint64_t{1} << 32) / dom.stride + ((uint64_t{1} << 32) % dom.stride ? 1 : 0);
  std::vector<uint32_t> in, out;
  const int nt = dom.threads > 0 ? dom.threads : std::max(1u, std::thread::hardware_concurrency());
  std::mutex mu;
  for (uint64_t first = 0; first < total; first += kChunk) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(kChunk, total - first));
    in.resize(n), out.resize(n);
    for (size_t i = 0; i < n; ++i) in[i] = static_cast<uint32_t>((first + i) * dom.stride);
    unit(in.data(), out.data(), n);
    std::vector<std::thread> pool;
    for (int t = 0; t < nt; ++t)
      pool.emplace_back([&, t] {
        uint64_t bad = 0;
        std::vector<mismatch> local;
        for (size_t i = t; i < n; i += nt) {
          const uint32_t m = model(in[i]);
          if (!same_output(out[i], m)) {
            ++bad;
            if (local.size() < kMaxDump) local.push_back({in[i], 0, out[i], m});
          }
        }
        std::lock_guard<std::mutex> g(mu);
        r.mismatches += bad;
        r.dump.insert(r.dump.end(), local.begin(), local.end());
      });
    for (auto& th : pool) th.join();
    r.evaluated += n;
  }
  std::sort(r.dump.begin(), r.dump.end(), [](const mismatch& x, const mismatch& y) { return x.a < y.a; });
  if (r.dump.size() > kMaxDump) r.dump.resize(kMaxDump);
  return r;
}

sfu_analysis analyze_table_unit(const char* unit_name, formats::sfu_kind kind, formats::sfu_rule rule,
                                float basis_scale, const unary_eval& unit, const unary_domain& dom,
                                const std::function<float(float)>& ieee) {
  sfu_analysis a;
  a.unit = unit_name;
  const std::vector<uint32_t> g = basis(unit, basis_scale);
  const int k = smallest_k(g);
  formats::sfu_table t;
  t.kind = kind, t.rule = rule, t.bits = k;
  const size_t run = size_t{1} << (23 - k);
  for (size_t j = 0; j < (size_t{1} << k); ++j) t.entries.push_back(g[j * run]);
  const std::string why = t.check();
  hypothesis_result h;
  if (!why.empty()) {  // the basis itself breaks the rule (entries out of range): no verification
    h.name = std::string(formats::sfu_rule_name(rule)) + "(k=" + std::to_string(k) + "): " + why;
    h.mismatches = 1;
  } else {
    h = verify_unary(
        std::string(formats::sfu_rule_name(rule)) + "(k=" + std::to_string(k) + ")", unit,
        [&](uint32_t x) { return fbits(kind == formats::sfu_kind::ex2 ? t.ex2(ffrom(x)) : t.rcp(ffrom(x))); }, dom);
  }
  a.found = why.empty() && h.mismatches == 0;
  a.tried.push_back(h);
  if (a.found) a.table = t;
  a.ieee = verify_unary(
      "ieee", unit, [&](uint32_t x) { return fbits(ieee(ffrom(x))); }, dom);
  return a;
}

void json_str(std::string& o, const std::string& s) {
  o += '"';
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\';
    o += c;
  }
  o += '"';
}

void json_hyp(std::string& o, const hypothesis_result& h) {
  char buf[128];
  o += "{\"name\": ";
  json_str(o, h.name);
  std::snprintf(buf, sizeof buf, ", \"evaluated\": %llu, \"mismatches\": %llu, \"dump\": [",
                static_cast<unsigned long long>(h.evaluated), static_cast<unsigned long long>(h.mismatches));
  o += buf;
  for (size_t i = 0; i < h.dump.size(); ++i) {
    const auto& m = h.dump[i];
    std::snprintf(buf, sizeof buf, "%s{\"a\": \"%08x\", \"b\": \"%08x\", \"hw\": \"%08x\", \"model\": \"%08x\"}",
                  i ? ", " : "", m.a, m.b, m.hw, m.model);
    o += buf;
  }
  o += "]}";
}

}  // namespace

sfu_analysis analyze_ex2(const unary_eval& unit, const unary_domain& dom) {
  // ex2(1 + f) = 2 g(f): the basis scaled by 1/2 holds g(f) in [1, 2]
  return analyze_table_unit("ex2.approx.ftz.f32", formats::sfu_kind::ex2, formats::sfu_rule::ex2_frac, 0.5f, unit, dom,
                            [](float x) { return ftz(std::exp2f(ftz(x))); });
}

sfu_analysis analyze_rcp(const unary_eval& unit, const unary_domain& dom) {
  // rcp(1 + f) in [0.5, 1]: the basis is the table
  return analyze_table_unit("rcp.approx.ftz.f32", formats::sfu_kind::rcp, formats::sfu_rule::rcp_mant, 1.0f, unit, dom,
                            [](float x) { return ftz(1.0f / ftz(x)); });
}

std::vector<std::pair<uint32_t, uint32_t>> structured_div_samples(int mant_bits) {
  std::vector<uint32_t> bs, as;
  const int exps[] = {-126, -100, -20, -1, 0, 1, 20, 100, 125, 126, 127};
  const uint32_t step = uint32_t{1} << (23 - std::clamp(mant_bits, 0, 23));
  for (int e : exps)
    for (uint32_t m = 0; m < (1u << 23); m += step)
      for (uint32_t s : {0u, 0x80000000u}) bs.push_back(s | (static_cast<uint32_t>(e + 127) << 23) | m);
  for (uint32_t b : {0x00000000u, 0x00000001u, 0x007FFFFFu, 0x7F800000u, 0xFF800000u, 0x7FC00000u}) bs.push_back(b);
  const float nums[] = {1.0f,   -1.0f, 3.0f,  0.7f,     1.9999999f, 448.0f, 127.0f,  2.25f,
                        1e-30f, 1e30f, 3e38f, 1.2e-38f, 0.0f,       -0.0f,  INFINITY};
  for (float v : nums) as.push_back(fbits(v));
  as.push_back(0x7FC00000u);
  as.push_back(0x00000010u);  // subnormal numerator
  std::vector<std::pair<uint32_t, uint32_t>> out;
  out.reserve(as.size() * bs.size());
  for (uint32_t a : as)
    for (uint32_t b : bs) out.emplace_back(a, b);
  return out;
}

sfu_analysis analyze_div(const binary_eval& unit, const formats::sfu_table* rcp,
                         const std::vector<std::pair<uint32_t, uint32_t>>& samples) {
  sfu_analysis a;
  a.unit = "div.full.f32";
  std::vector<uint32_t> xa(samples.size()), xb(samples.size()), hw(samples.size());
  for (size_t i = 0; i < samples.size(); ++i) xa[i] = samples[i].first, xb[i] = samples[i].second;
  for (size_t i = 0; i < samples.size(); i += kChunk)
    unit(xa.data() + i, xb.data() + i, hw.data() + i, std::min(kChunk, samples.size() - i));
  auto run = [&](const std::string& name, const std::function<uint32_t(uint32_t, uint32_t)>& model) {
    hypothesis_result h;
    h.name = name;
    for (size_t i = 0; i < samples.size(); ++i) {
      const uint32_t m = model(xa[i], xb[i]);
      ++h.evaluated;
      if (!same_output(hw[i], m)) {
        ++h.mismatches;
        if (h.dump.size() < kMaxDump) h.dump.push_back({xa[i], xb[i], hw[i], m});
      }
    }
    return h;
  };
  formats::sfu_table mul;
  if (rcp) {
    mul.kind = formats::sfu_kind::div, mul.rule = formats::sfu_rule::div_mul_rcp, mul.bits = rcp->bits;
    mul.entries = rcp->entries;
    a.tried.push_back(run("div_mul_rcp(k=" + std::to_string(rcp->bits) + ")",
                          [&](uint32_t x, uint32_t y) { return fbits(mul.div(ffrom(x), ffrom(y))); }));
    if (a.tried.back().mismatches == 0) a.found = true, a.table = mul;
  }
  formats::sfu_table ieee;
  ieee.kind = formats::sfu_kind::div, ieee.rule = formats::sfu_rule::div_ieee;
  a.ieee = run("ieee", [&](uint32_t x, uint32_t y) { return fbits(ieee.div(ffrom(x), ffrom(y))); });
  hypothesis_result h2 = a.ieee;
  h2.name = "div_ieee";
  a.tried.push_back(h2);
  if (!a.found && h2.mismatches == 0) a.found = true, a.table = ieee;
  return a;
}

std::string to_json(const sfu_analysis& a) {
  std::string o = "{\"unit\": ";
  json_str(o, a.unit);
  o += std::string(", \"found\": ") + (a.found ? "true" : "false");
  if (a.found) {
    o += ", \"rule\": ";
    json_str(o, formats::sfu_rule_name(a.table.rule));
    o += ", \"bits\": " + std::to_string(a.table.bits) + ", \"entries\": " + std::to_string(a.table.entries.size());
  }
  o += ", \"hypotheses\": [";
  for (size_t i = 0; i < a.tried.size(); ++i) {
    if (i) o += ", ";
    json_hyp(o, a.tried[i]);
  }
  o += "], \"ieee\": ";
  json_hyp(o, a.ieee);
  o += "}";
  return o;
}

}  // namespace attnum::gpu
