// core/'s one random stream, one content hash and one same-configuration check, against their
// published test vectors and on the cases the callers rely on.
#include <gtest/gtest.h>

#include <string>

#include "attnum/core/error.h"
#include "attnum/core/hash.h"
#include "attnum/core/random.h"
#include "attnum/core/same_config.h"

namespace {
using namespace attnum::core;

TEST(core_hash, fnv1a64_test_vectors_and_chaining) {
  EXPECT_EQ(fnv1a64("", 0), 0xcbf29ce484222325ULL);  // the offset basis
  EXPECT_EQ(fnv1a64("a", 1), 0xaf63dc4c8601ec8cULL);
  EXPECT_EQ(fnv1a64("foobar", 6), 0x85944171f73967e8ULL);
  EXPECT_EQ(fnv1a64("bar", 3, fnv1a64("foo", 3)), fnv1a64("foobar", 6));  // chunks chain
  EXPECT_EQ(fnv1a_hex("a", 1), "af63dc4c8601ec8c");
}

TEST(core_random, splitmix64_reference_stream) {
  splitmix64 r(0);  // Vigna's splitmix64.c, seed 0
  EXPECT_EQ(r.next(), 0xe220a8397b1dcdafULL);
  EXPECT_EQ(r.next(), 0x6e789e6aa1b965f4ULL);
  EXPECT_EQ(r.next(), 0x06c45d188009454fULL);
  splitmix64 a(42), b(42);
  for (int i = 0; i < 1000; ++i) {
    const double u = a.uniform(), o = a.uniform_open();
    EXPECT_TRUE(u >= 0 && u < 1);
    EXPECT_TRUE(o > 0 && o < 1);
    EXPECT_LT(a.below(7), 7u);
    const double s = a.sign();
    EXPECT_TRUE(s == 1.0 || s == -1.0);
    (void)b.next(), (void)b.next(), (void)b.next(), (void)b.next();
  }
  EXPECT_EQ(a.state, b.state);  // four draws per iteration on both
}

TEST(core_same_config, names_the_first_differing_field) {
  const nlohmann::json stored = {{"kernels", {"fa3"}}, {"seed", 1}, {"command", "x"}};
  EXPECT_NO_THROW(require_same_config(stored, {{"kernels", {"fa3"}}, {"seed", 1}}, "f", "hint", {"command"}));
  try {
    require_same_config(stored, {{"kernels", {"fa3"}}, {"seed", 2}}, "dir/study.json", "use another --out",
                        {"command"});
    FAIL() << "no error";
  } catch (const attnum::error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("dir/study.json: the stored configuration differs from this run's in 1 field (stored -> "
                     "this run): seed: 1 -> 2; use another --out"),
              std::string::npos)
        << m;
  }
  // Nested fields are named down to the leaf, each difference once, values cut short.
  const nlohmann::json k1 = {{"kernels", {{{"name", "fa3"}, {"qk_acc", {{"bits", 24}}}}}},
                             {"rotation", std::string(500, 'r')}};
  nlohmann::json k2 = k1;
  k2["kernels"][0]["qk_acc"]["bits"] = 13;
  k2["rotation"] = std::string(500, 's');
  k2["extra"] = true;
  try {
    require_same_config(k1, k2, "f", "hint");
    FAIL() << "no error";
  } catch (const attnum::error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("in 3 fields"), std::string::npos) << m;
    EXPECT_NE(m.find("kernels[0].qk_acc.bits: 24 -> 13"), std::string::npos) << m;
    EXPECT_NE(m.find("extra: (none) -> true"), std::string::npos) << m;
    EXPECT_NE(m.find("rotation: \"rrrr"), std::string::npos) << m;
    EXPECT_LT(m.size(), 400u) << m;  // not the two whole configurations
  }
  // Another kernel: its name, not every knob that differs with it.
  nlohmann::json k3 = k1;
  k3["kernels"][0] = {{"name", "sage1"}, {"qk_acc", {{"bits", 32}}}};
  try {
    require_same_config(k1, k3, "f", "hint");
    FAIL() << "no error";
  } catch (const attnum::error& e) {
    EXPECT_NE(std::string(e.what()).find("in 1 field (stored -> this run): kernels[0]: \"fa3\" -> \"sage1\"; hint"),
              std::string::npos)
        << e.what();
  }
  // A field only the stored configuration has is a difference too (unless ignored).
  EXPECT_THROW(require_same_config(stored, {{"kernels", {"fa3"}}, {"seed", 1}}, "f", "hint"), attnum::error);
}

}  // namespace
