// The knobs exp2_unit / rcp_unit / div_unit and the measured-table format (formats/sfu_unit.h):
// a table of a simulated unit makes the engine equal, bit for bit, the plain-loop fp32 attention
// that calls the same unit written in C++ (gpu/host/sim_units.h, sharing no code with the rule
// decoder); ieee stays the default and changes nothing; bad tables fail naming file and line.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <bit>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "attention/test_util.h"
#include "attnum/attention/engine.h"
#include "attnum/attention/kernel_spec.h"
#include "attnum/core/error.h"
#include "attnum/formats/scale.h"
#include "attnum/formats/sfu_unit.h"
#include "gpu/host/sim_units.h"

namespace attnum::attention {
namespace {

namespace fs = std::filesystem;

struct tmpdir {
  fs::path p;
  tmpdir() {
    p = fs::temp_directory_path() / ("sfu_unit_test." + std::to_string(::getpid()));
    fs::create_directories(p);
  }
  ~tmpdir() { fs::remove_all(p); }
  std::string file(const std::string& n) const { return (p / n).string(); }
};

formats::sfu_table ex2_table(const gpu::sim::table_ex2& u) {
  formats::sfu_table t;
  t.kind = formats::sfu_kind::ex2, t.rule = formats::sfu_rule::ex2_frac, t.bits = u.k;
  for (float g : u.g) t.entries.push_back(std::bit_cast<uint32_t>(g));
  return t;
}
formats::sfu_table rcp_table(const gpu::sim::table_rcp& u, formats::sfu_kind kind = formats::sfu_kind::rcp) {
  formats::sfu_table t;
  t.kind = kind, t.rule = kind == formats::sfu_kind::rcp ? formats::sfu_rule::rcp_mant : formats::sfu_rule::div_mul_rcp;
  t.bits = u.k;
  for (float r : u.r) t.entries.push_back(std::bit_cast<uint32_t>(r));
  return t;
}

std::vector<float> run_all(const kernel_spec& s, const test::layer_data& L) {
  return run_layer(s, L.view, condition::plain, true);
}

void expect_same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  ASSERT_EQ(a.size(), b.size());
  size_t bad = 0;
  for (size_t i = 0; i < a.size(); ++i) bad += std::bit_cast<uint32_t>(a[i]) != std::bit_cast<uint32_t>(b[i]);
  EXPECT_EQ(bad, 0u) << "of " << a.size();
}

TEST(sfu_unit_test, the_rules_equal_the_simulated_units) {
  const gpu::sim::table_ex2 e(8);
  const gpu::sim::table_rcp r(7);
  const auto te = ex2_table(e), tr = rcp_table(r), td = rcp_table(r, formats::sfu_kind::div);
  // A tiny negative x: frac(x) is 1 - 2^-60, whose top bits are all ones (the last entry, times
  // 2^-1), not one past the table.
  EXPECT_EQ(te.ex2(-0x1p-60f), std::bit_cast<float>(te.entries.back()) * 0.5f);
  EXPECT_EQ(e(-0x1p-60f), e.g.back() * 0.5f);
  for (uint64_t u = 0; u < (uint64_t{1} << 32); u += 65521) {
    const float x = std::bit_cast<float>(static_cast<uint32_t>(u));
    const float ye = te.ex2(x), se = e(x), yr = tr.rcp(x), sr = r(x);
    if (std::isnan(se))
      EXPECT_TRUE(std::isnan(ye));
    else
      ASSERT_EQ(std::bit_cast<uint32_t>(ye), std::bit_cast<uint32_t>(se)) << x;
    if (std::isnan(sr))
      EXPECT_TRUE(std::isnan(yr));
    else
      ASSERT_EQ(std::bit_cast<uint32_t>(yr), std::bit_cast<uint32_t>(sr)) << x;
    const float b = std::bit_cast<float>(static_cast<uint32_t>(u * 2654435761u));
    const float yd = td.div(x, b), sd = gpu::sim::mul_rcp_div{&r}(x, b);
    if (!std::isnan(sd)) {
      ASSERT_EQ(std::bit_cast<uint32_t>(yd), std::bit_cast<uint32_t>(sd)) << x << " / " << b;
    }
  }
}

TEST(sfu_unit_test, engine_with_tables_equals_the_units_in_cpp) {
  tmpdir dir;
  const gpu::sim::table_ex2 e(11);
  const gpu::sim::table_rcp r(9);
  formats::write_sfu_table(dir.file("ex2.tbl"), ex2_table(e));
  formats::write_sfu_table(dir.file("rcp.tbl"), rcp_table(r));
  formats::write_sfu_table(dir.file("div.tbl"), rcp_table(r, formats::sfu_kind::div));
  const int H = 2, Hkv = 1, n = 150, d = 32;  // two KV blocks of 128: the rescale factor runs
  auto L = test::random_layer(H, Hkv, n, n, d, 41, 2.0f);
  const auto ieee_div = [](float a, float b) { return a / b; };
  // exp2 and 1/l
  const auto spec =
      resolve_kernel("fp32", {"exp2_unit=table:" + dir.file("ex2.tbl"), "rcp_unit=table:" + dir.file("rcp.tbl")});
  expect_same_bits(run_all(spec, L),
                   gpu::sim::fp32_attention(L.q, L.k, L.v, H, Hkv, n, d, e, r, ieee_div, false, false));
  // exp2 with the divisions: Q cast per token to INT8 (amax / 127, x / scale) and O / l
  const auto sd =
      resolve_kernel("fp32", {"q.fmt=int8", "q.gran=token", "q.scale_max=127", "q.rnd=half_away", "epilogue=divide",
                              "exp2_unit=table:" + dir.file("ex2.tbl"), "div_unit=table:" + dir.file("div.tbl")});
  expect_same_bits(run_all(sd, L), gpu::sim::fp32_attention(
                                       L.q, L.k, L.v, H, Hkv, n, d, e, [](float x) { return 1.0f / x; },
                                       gpu::sim::mul_rcp_div{&r}, true, true));
  // and the oracle is not blind to the units: ieee gives other bits
  const auto ieee = run_all(resolve_kernel("fp32"), L);
  const auto sim = gpu::sim::fp32_attention(L.q, L.k, L.v, H, Hkv, n, d, e, r, ieee_div, false, false);
  size_t differ = 0;
  for (size_t i = 0; i < ieee.size(); ++i) differ += ieee[i] != sim[i];
  EXPECT_GT(differ, ieee.size() / 2);
}

TEST(sfu_unit_test, ieee_is_the_default_and_changes_nothing) {
  const auto L = test::random_layer(2, 1, 96, 96, 64, 7, 1.5f);
  for (const char* k : {"fa3", "sage2pp-sm89", "sage1", "flashinfer-sm90", "xqa-sm90"}) {
    const auto& p = preset(k);
    EXPECT_EQ(p.exp2_unit.name, "ieee");
    EXPECT_EQ(p.rcp_unit.name, "ieee");
    EXPECT_EQ(p.div_unit.name, "ieee");
    const auto j = to_json(p);
    EXPECT_EQ(j.at("exp2_unit"), "ieee");
    EXPECT_EQ(j.at("rcp_unit"), "ieee");
    EXPECT_EQ(j.at("div_unit"), "ieee");
    expect_same_bits(run_all(p, L),
                     run_all(resolve_kernel(k, {"exp2_unit=ieee", "rcp_unit=ieee", "div_unit=ieee"}), L));
  }
}

TEST(sfu_unit_test, a_div_table_reaches_the_quantizer) {
  const gpu::sim::table_rcp r(6);
  const auto td = rcp_table(r, formats::sfu_kind::div);
  const gpu::sim::mul_rcp_div div{&r};
  formats::scale_spec s;
  s.fmt = formats::format::int8, s.fmt_max = 127, s.rnd = formats::rounding::half_away, s.div = &td;
  const float x[5] = {0.3f, -1.7f, 2.9f, 1e-3f, -2.95f};
  const double amax = 2.95;
  const float scale = formats::group_scale(amax, s);
  EXPECT_EQ(std::bit_cast<uint32_t>(scale), std::bit_cast<uint32_t>(div(static_cast<float>(amax), 127.0f)));
  float out[5];
  formats::cast_span_in_group(x, out, 5, amax, scale, s);
  for (int i = 0; i < 5; ++i) {
    const float y = div(x[i], scale);
    EXPECT_EQ(out[i], std::clamp(std::trunc(y + std::copysign(0.5f, y)), -128.0f, 127.0f)) << i;
  }
}

TEST(sfu_unit_test, bad_tables_and_values_fail_naming_file_and_field) {
  tmpdir dir;
  auto message = [](const std::vector<std::string>& knobs) {
    try {
      resolve_kernel("fp32", knobs);
    } catch (const error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message({"exp2_unit=fast"}).find("expected ieee or table:PATH"), std::string::npos);
  EXPECT_NE(message({"exp2_unit=table:" + dir.file("missing.tbl")}).find("missing.tbl: cannot read"),
            std::string::npos);
  {
    std::ofstream o(dir.file("bad.tbl"));
    o << "attnum-sfu-table 1\nunit ex2\nrule ex2_frac\nbits 1\nentries 2\ndata\n3f800000\nzz\nend\n";
  }
  const auto m = message({"exp2_unit=table:" + dir.file("bad.tbl")});
  EXPECT_NE(m.find("bad.tbl: line 8: data: 'zz' is not 8 hex digits"), std::string::npos) << m;
  const gpu::sim::table_rcp r(4);
  formats::write_sfu_table(dir.file("rcp.tbl"), rcp_table(r));
  EXPECT_NE(message({"exp2_unit=table:" + dir.file("rcp.tbl")}).find("unit rcp, expected a ex2 table"),
            std::string::npos);
  EXPECT_NE(message({"rcp_unit=table:" + dir.file("rcp.tbl"), "arith_fp64=true"}).find("takes only ieee"),
            std::string::npos);
  // a FIFO or a symlink to /dev/zero is refused at once, never read (it would block or grow
  // without end); a huge value is quoted clipped
  ASSERT_EQ(::mkfifo(dir.file("fifo.tbl").c_str(), 0600), 0);
  const auto f = message({"exp2_unit=table:" + dir.file("fifo.tbl")});
  EXPECT_NE(f.find("fifo.tbl: is a FIFO (named pipe), expected a regular file"), std::string::npos) << f;
  fs::create_symlink("/dev/zero", dir.file("zero.tbl"));
  const auto z = message({"exp2_unit=table:" + dir.file("zero.tbl")});
  EXPECT_NE(z.find("zero.tbl: is not a regular file, expected a regular file"), std::string::npos) << z;
  {
    std::ofstream o(dir.file("huge.tbl"));
    o << "attnum-sfu-table 1\nunit " << std::string(5 << 20, 'x') << "\n";
  }
  const auto h = message({"exp2_unit=table:" + dir.file("huge.tbl")});
  EXPECT_NE(h.find("huge.tbl: line 2: unit: 'xxx"), std::string::npos) << h.substr(0, 300);
  EXPECT_NE(h.find("(5242880 bytes)"), std::string::npos) << h.substr(0, 300);
  EXPECT_LT(h.size(), 600u);
  // a table outside its rule's range is not written
  auto t = rcp_table(r);
  t.entries[3] = std::bit_cast<uint32_t>(3.0f);
  EXPECT_THROW(formats::write_sfu_table(dir.file("x.tbl"), t), error);
  EXPECT_FALSE(fs::exists(dir.file("x.tbl")));
}

}  // namespace
}  // namespace attnum::attention
