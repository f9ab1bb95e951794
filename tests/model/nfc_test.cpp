// NFC against the examples of UAX #15 and the Unicode standard (composition, Hangul, singletons,
// canonical reordering, composition exclusions, blocking); NFKC against UAX #15's compatibility
// examples (every code point: nfkc_golden_test).
#include <gtest/gtest.h>

#include "attnum/model/nfc.h"

namespace {
using attnum::model::nfc;
using attnum::model::nfkc;

TEST(nfc_test, uax15_examples) {
  EXPECT_EQ(nfc("plain ascii, unchanged"), "plain ascii, unchanged");
  EXPECT_EQ(nfc("e\u0301"), "\u00e9");               // e + acute -> é
  EXPECT_EQ(nfc("A\u030a"), "\u00c5");               // A + ring -> Å
  EXPECT_EQ(nfc("\u212b"), "\u00c5");                // ANGSTROM SIGN (singleton) -> Å
  EXPECT_EQ(nfc("\u2126"), "\u03a9");                // OHM SIGN -> GREEK CAPITAL OMEGA
  EXPECT_EQ(nfc("\u1e0b\u0323"), "\u1e0d\u0307");    // d-dot-above + dot-below -> d-dot-below + dot-above
  EXPECT_EQ(nfc("q\u0307\u0323"), "q\u0323\u0307");  // reordered, nothing composes
  EXPECT_EQ(nfc("\u1100\u1161\u11a8"), "\uac01");    // Hangul L V T -> 각
  EXPECT_EQ(nfc("\uac00\u11a8"), "\uac01");          // LV + T -> LVT
  EXPECT_EQ(nfc("\u0958"), "\u0915\u093c");          // composition exclusion stays decomposed
  EXPECT_EQ(nfc("\u00c4pfel"), "\u00c4pfel");        // already NFC
  EXPECT_EQ(nfc("A\u0308pfel"), "\u00c4pfel");
  EXPECT_EQ(nfc("a\u0301\u0301"), "\u00e1\u0301");  // second acute is blocked (same class)
  EXPECT_EQ(nfc("\u0301e"), "\u0301e");             // leading non-starter composes with nothing
  EXPECT_EQ(nfc(std::string("\xff"
                            "e\xcc\x81",
                            4)),
            std::string("\xff\xc3\xa9", 3));  // invalid byte kept
}

TEST(nfc_test, nfkc_applies_compatibility_decompositions) {
  EXPECT_EQ(nfkc("plain ascii, unchanged"), "plain ascii, unchanged");
  EXPECT_EQ(nfkc("\ufb01"), "fi");                 // LATIN SMALL LIGATURE FI
  EXPECT_EQ(nfc("\ufb01"), "\ufb01");              // NFC keeps it
  EXPECT_EQ(nfkc("\u00b2"), "2");                  // SUPERSCRIPT TWO
  EXPECT_EQ(nfkc("\u2168"), "IX");                 // ROMAN NUMERAL NINE
  EXPECT_EQ(nfkc("\uff76"), "\u30ab");             // HALFWIDTH KATAKANA KA -> KA
  EXPECT_EQ(nfkc("\u00a0"), " ");                  // NO-BREAK SPACE
  EXPECT_EQ(nfkc("\u2026"), "...");                // HORIZONTAL ELLIPSIS
  EXPECT_EQ(nfkc("\u1e9b\u0323"), "\u1e69");       // UAX #15 figure 6: long s dot above + dot below
  EXPECT_EQ(nfc("\u1e9b\u0323"), "\u1e9b\u0323");  // NFC: unchanged
  EXPECT_EQ(nfkc("\u3131"), "\u1100");             // HANGUL LETTER KIYEOK -> CHOSEONG KIYEOK
  EXPECT_EQ(nfkc("A\u030a"), "\u00c5");            // canonical composition still applies
  EXPECT_EQ(nfkc(std::string("\xff"
                             "\xef\xac\x81",
                             4)),
            std::string("\xff"
                        "fi",
                        3));  // invalid byte kept
}
}  // namespace
