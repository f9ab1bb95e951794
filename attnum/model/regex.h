#pragma once
// A regular-expression engine over Unicode code points for the split patterns of Hugging Face
// tokenizer.json pre-tokenizers, with the match semantics of Oniguruma (which the tokenizers
// library uses): leftmost-first alternation, greedy quantifiers unless marked lazy.
//
// Supported: literals and escapes (\r \n \t \f \v \e \0 \xHH \x{H..} \uHHHH, an escaped
// punctuation character), `.` (any code point but \n), classes [...] and [^...] with ranges, the
// shorthands \s \S \d \D \w \W and \p{..} \P{..} (general categories L Lu Ll Lt Lm Lo M Mn Mc Me N
// Nd Nl No P Pc Pd Ps Pe Pi Pf Po S Sm Sc Sk So Z Zs Zl Zp C Cc Cf Cs Co Cn, also as \pL), groups
// (...) (?:...) (?i:...) (?-i:...) and (?i) to the end of the group, alternation, quantifiers ? *
// + {n} {n,} {n,m} (lazy with a trailing ?, possessive with a trailing + after ? * +), atomic groups
// (?>...), lookahead (?=...) (?!...). Everything else (anchors, back-references, lookbehind,
// \b, nested classes, Unicode scripts) is refused when the pattern is compiled.
//
// Unicode classes as Oniguruma's doc/RE defines them: \s is U+0009-000D, U+0085, Z; \d is Nd; \w
// is L, M, N, Pc. (?i) matches code points with the same simple case fold (kFoldPairs in
// unicode_tables.inc: 's', 'S' and U+017F match each other), never a fold to several code points.
//
// Matching is backtracking with an explicit stack (no recursion on the input) and a visited set
// of (instruction, position) states shared by the attempts of one scan (as RE2's bit-state
// engine), so a scan costs at most instructions x positions steps while the set lasts (16 MB of
// stamps); beyond it an attempt may backtrack as a plain backtracker does.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace attnum::model {

/// Unicode general category of a code point: an index into unicode_category_name (Lu = 0 ... Cn).
int unicode_category(char32_t c);
/// The two-letter name of category index k ("Lu", "Ll", ...).
const char* unicode_category_name(int k);

/// A compiled pattern. The constructor throws attnum::error naming the unsupported or malformed
/// construct and its code point offset in the pattern (callers prefix the file and field).
class regex {
 public:
  explicit regex(std::string_view pattern_utf8);

  /// Whether the pattern can match the empty string.
  bool can_match_empty() const { return nullable_; }

  /// The leftmost-first match in text[from, size) as code point indices [begin, end), or nullopt.
  struct match {
    size_t begin, end;
  };
  std::optional<match> find(const std::vector<char32_t>& text, size_t from) const;
  /// Appends every match of a left-to-right scan to `out`: find from 0, then from the end of
  /// each match (one code point further after an empty match).
  void find_all(const std::vector<char32_t>& text, std::vector<match>& out) const;

  /// One code point class: sorted disjoint ranges, and a bitmap of its ASCII members.
  struct char_set {
    std::vector<std::pair<char32_t, char32_t>> ranges;
    uint64_t ascii[2] = {0, 0};
    bool contains(char32_t c) const { return c < 128 ? (ascii[c >> 6] >> (c & 63)) & 1 : contains_slow(c); }
    bool contains_slow(char32_t c) const;
  };
  enum class op : uint8_t { set, jump, split, match, look, atomic };
  struct inst {
    op o;
    bool neg = false;  // look: (?!...)
    int x = 0, y = 0;  // set: set index; jump: x; split: x first, then y; look/atomic: sub-program
    // split only: when branch x must consume a code point first (x_filter), the ASCII code
    // points it can start with, and whether it can start with a non-ASCII one; the matcher skips
    // x at any other code point and at the end of the text.
    bool x_filter = false, x_first_non_ascii = false;
    uint64_t x_first[2] = {0, 0};
  };

 private:
  friend class regex_matcher;
  std::vector<inst> prog_;
  std::vector<char_set> sets_;
  bool nullable_ = false;
};

}  // namespace attnum::model
