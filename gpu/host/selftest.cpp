// The probe kit's self-test without a GPU (scripts/gpu-probe --self-test): the host analyses run
// on simulated units (sim_units.h) and must recover each exactly; the tables they write, and the
// layer the fp32 oracle runs with the simulated units, go to --out for the script's comparison
// with `attnum attend`.
//
//   selftest --out DIR          analyses + files; exit 1 when a check fails
//   selftest --compare A B      exit 0 when the float32 data of two .npy files has the same bits
#include <bit>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "attnum/formats/sfu_unit.h"
#include "gpu/host/mma_analysis.h"
#include "gpu/host/sfu_analysis.h"
#include "gpu/host/sim_units.h"

using namespace attnum;

namespace {

int failures = 0;
void check(bool ok, const std::string& what) {
  std::printf("%s %s\n", ok ? "ok  " : "FAIL", what.c_str());
  failures += !ok;
}

void write_npy(const std::string& path, const std::vector<float>& x, const std::vector<int>& shape) {
  std::string dims;
  for (int s : shape) dims += std::to_string(s) + ", ";
  std::string h = "{'descr': '<f4', 'fortran_order': False, 'shape': (" + dims + "), }";
  while ((10 + h.size() + 1) % 64) h += ' ';
  h += '\n';
  std::ofstream o(path, std::ios::binary);
  o.write("\x93NUMPY\x01\x00", 8);
  const uint16_t n = static_cast<uint16_t>(h.size());
  o.write(reinterpret_cast<const char*>(&n), 2);
  o << h;
  o.write(reinterpret_cast<const char*>(x.data()), static_cast<std::streamsize>(x.size() * 4));
}

// The float32 payload of a .npy file (version 1 or 2 header); empty on error.
std::vector<uint32_t> read_npy_bits(const std::string& path, std::string& header) {
  std::ifstream in(path, std::ios::binary);
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (all.size() < 12 || all.compare(0, 6, "\x93NUMPY") != 0) return {};
  const bool v1 = all[6] == 1;
  const size_t hl = v1 ? (static_cast<unsigned char>(all[8]) | static_cast<unsigned char>(all[9]) << 8)
                       : (static_cast<unsigned char>(all[8]) | static_cast<unsigned char>(all[9]) << 8 |
                          static_cast<unsigned char>(all[10]) << 16 | static_cast<unsigned char>(all[11]) << 24);
  const size_t off = (v1 ? 10 : 12) + hl;
  header = all.substr(v1 ? 10 : 12, hl);
  if (header.find("'<f4'") == std::string::npos || off > all.size()) return {};
  std::vector<uint32_t> v((all.size() - off) / 4);
  std::memcpy(v.data(), all.data() + off, v.size() * 4);
  return v;
}

int compare(const std::string& a, const std::string& b) {
  std::string ha, hb;
  const auto x = read_npy_bits(a, ha), y = read_npy_bits(b, hb);
  if (x.empty() || x.size() != y.size()) {
    std::printf("FAIL compare %s (%zu floats) with %s (%zu floats): not two float32 arrays of one size\n", a.c_str(),
                x.size(), b.c_str(), y.size());
    return 1;
  }
  size_t bad = 0, first = 0;
  for (size_t i = 0; i < x.size(); ++i)
    if (x[i] != y[i] && !bad++) first = i;
  if (bad) {
    std::printf("FAIL %s vs %s: %zu of %zu floats differ (first at %zu: %08x vs %08x)\n", a.c_str(), b.c_str(), bad,
                x.size(), first, x[first], y[first]);
    return 1;
  }
  std::printf("ok   %s and %s: all %zu floats have the same bits\n", a.c_str(), b.c_str(), x.size());
  return 0;
}

template <typename F>
gpu::unary_eval unary(const F& f) {
  return [f](const uint32_t* in, uint32_t* out, size_t n) {
    for (size_t i = 0; i < n; ++i) out[i] = std::bit_cast<uint32_t>(f(std::bit_cast<float>(in[i])));
  };
}

gpu::mma_eval mma_of(const std::function<double(const gpu::mma_vec&)>& f) {
  return [f](const std::vector<gpu::mma_vec>& v, std::vector<double>& d) {
    d.resize(v.size());
    for (size_t i = 0; i < v.size(); ++i) d[i] = f(v[i]);
  };
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 4 && std::string(argv[1]) == "--compare") return compare(argv[2], argv[3]);
  if (argc != 3 || std::string(argv[1]) != "--out") {
    std::fprintf(stderr, "usage: selftest --out DIR | --compare A.npy B.npy\n");
    return 2;
  }
  const std::string dir = argv[2];
  const gpu::unary_domain dom{4093, 0};  // every 4093rd bit pattern (~1M) plus the basis

  // 1. ex2: a table unit on 11 fraction bits is recovered exactly
  const gpu::sim::table_ex2 sex2(11);
  const auto ae = gpu::analyze_ex2(unary(sex2), dom);
  bool same = ae.found && ae.table.bits == 11 && ae.table.entries.size() == sex2.g.size();
  for (size_t i = 0; same && i < sex2.g.size(); ++i) same = ae.table.entries[i] == std::bit_cast<uint32_t>(sex2.g[i]);
  check(same, "ex2: simulated table unit (k = 11) recovered: rule ex2_frac, k and all 2048 entries");
  check(ae.ieee.mismatches > 0,
        "ex2: the simulated unit differs from exp2f (" + std::to_string(ae.ieee.mismatches) + " inputs)");
  // a unit outside the hypothesis (exp2f on every fraction bit): reported, not written
  const auto an = gpu::analyze_ex2(unary([](float x) { return gpu::sim::flush(std::exp2f(gpu::sim::flush(x))); }), dom);
  check(!an.found && !an.tried.empty() && an.tried[0].mismatches > 0 && !an.tried[0].dump.empty() &&
            an.tried[0].dump.size() <= gpu::kMaxDump,
        "ex2: exp2f itself is not an ex2_frac table (" + std::to_string(an.tried.empty() ? 0 : an.tried[0].mismatches) +
            " mismatches, dump bounded)");

  // 2. rcp on 9 significand bits
  const gpu::sim::table_rcp srcp(9);
  const auto ar = gpu::analyze_rcp(unary(srcp), dom);
  same = ar.found && ar.table.bits == 9 && ar.table.entries.size() == srcp.r.size();
  for (size_t i = 0; same && i < srcp.r.size(); ++i) same = ar.table.entries[i] == std::bit_cast<uint32_t>(srcp.r[i]);
  check(same, "rcp: simulated table unit (k = 9) recovered: rule rcp_mant, k and all 512 entries");

  // 3. div: a * rcp(b) is H1; IEEE division is H2
  const gpu::sim::mul_rcp_div sdiv{&srcp};
  const auto samples = gpu::structured_div_samples(10);
  auto binary = [](auto f) -> gpu::binary_eval {
    return [f](const uint32_t* a, const uint32_t* b, uint32_t* out, size_t n) {
      for (size_t i = 0; i < n; ++i)
        out[i] = std::bit_cast<uint32_t>(f(std::bit_cast<float>(a[i]), std::bit_cast<float>(b[i])));
    };
  };
  const auto ad = gpu::analyze_div(binary(sdiv), ar.found ? &ar.table : nullptr, samples);
  check(ad.found && ad.table.rule == formats::sfu_rule::div_mul_rcp && ad.table.bits == 9,
        "div: simulated a * rcp(b) recovered as div_mul_rcp (" + std::to_string(samples.size()) + " samples)");
  const auto adi =
      gpu::analyze_div(binary([](float a, float b) { return a / b; }), ar.found ? &ar.table : nullptr, samples);
  check(adi.found && adi.table.rule == formats::sfu_rule::div_ieee, "div: IEEE division recovered as div_ieee");

  // 4. tensor cores: a truncating accumulator (13 bits, chunks of 16) and an fp32 RNE one
  const gpu::sim::trunc_acc ta{16, 13};
  const auto am = gpu::analyze_mma("sim.trunc13.k16", 32, gpu::mma_input::e4m3, gpu::mma_acc::fp32,
                                   mma_of([&](const gpu::mma_vec& v) { return ta(v.a, v.b, v.c); }));
  check(am.best.kind == "truncated" && am.best.mant_bits == 13 && am.best.k_step == 16 && am.best_mismatches == 0 &&
            am.kept_bits == 13 && am.rounding == "toward_zero" && am.exact_chunk == 16,
        "mma: simulated truncating accumulator recovered: " + am.best.knobs() + " (kept " +
            std::to_string(am.kept_bits) + ", " + am.rounding + ", chunk " + std::to_string(am.exact_chunk) + ")");
  const auto af =
      gpu::analyze_mma("sim.fp32.k32", 32, gpu::mma_input::e4m3, gpu::mma_acc::fp32, mma_of([&](const gpu::mma_vec& v) {
                         double s = 0;
                         for (size_t k = 0; k < v.a.size(); ++k) s += static_cast<double>(v.a[k]) * v.b[k];
                         return static_cast<double>(static_cast<float>(v.c + s));
                       }));
  check(af.best.kind == "fp32" && af.best.k_step == 32 && af.best_mismatches == 0 && af.rounding == "nearest",
        "mma: simulated exact-chunk fp32 accumulator recovered: " + af.best.knobs());

  // 5. tables and a layer for the CLI comparison (scripts/gpu-probe runs attnum attend on them)
  if (ae.found) formats::write_sfu_table(dir + "/ex2.tbl", ae.table);
  if (ar.found) formats::write_sfu_table(dir + "/rcp.tbl", ar.table);
  if (ad.found) formats::write_sfu_table(dir + "/div.tbl", ad.table);
  const auto back = formats::read_sfu_table(dir + "/ex2.tbl", formats::sfu_kind::ex2);
  check(back->entries == ae.table.entries, "ex2.tbl reads back to the same table");
  const int H = 4, Hkv = 2, n = 160, d = 64;
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> q(static_cast<size_t>(H) * n * d), k(static_cast<size_t>(Hkv) * n * d), v(k.size());
  for (auto& x : q) x = 2.0f * nd(rng);
  for (auto& x : k) x = 1.5f * nd(rng) + 0.25f;
  for (auto& x : v) x = nd(rng);
  write_npy(dir + "/q.npy", q, {H, n, d});
  write_npy(dir + "/k.npy", k, {Hkv, n, d});
  write_npy(dir + "/v.npy", v, {Hkv, n, d});
  const auto ieee_div = [](float a, float b) { return a / b; };
  write_npy(dir + "/expect_ex2_rcp.npy",
            gpu::sim::fp32_attention(q, k, v, H, Hkv, n, d, sex2, srcp, ieee_div, false, false), {H, n, d});
  write_npy(dir + "/expect_ex2_div.npy",
            gpu::sim::fp32_attention(
                q, k, v, H, Hkv, n, d, sex2, [](float x) { return 1.0f / x; }, sdiv, true, true),
            {H, n, d});
  std::printf("%s: %d check(s) failed\n", failures ? "FAIL" : "ok  ", failures);
  return failures ? 1 : 0;
}
