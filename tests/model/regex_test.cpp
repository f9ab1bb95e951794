// The split-pattern regex engine against cases worked by hand from Oniguruma's documented
// semantics (doc/RE: leftmost-first alternation, greedy and lazy quantifiers, possessive and
// atomic forms, lookahead, \s \d \w and \p{..} by general category, (?i) by case folding), the
// split patterns of GPT-2, Qwen2 and Llama 3 on short texts whose splits follow from the
// alternatives' order, and every unsupported construct refused by name.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "attnum/core/error.h"
#include "attnum/model/regex.h"
#include "attnum/model/tokenizer.h"
#include "attnum/model/utf8.h"

using attnum::model::regex;

namespace {

std::vector<char32_t> cps(std::string_view s) {
  std::vector<char32_t> out;
  for (size_t i = 0; i < s.size();) {
    const auto u = attnum::model::decode_utf8_at(s, i);
    out.push_back(u.cp);
    i += size_t(u.len);
  }
  return out;
}

std::string utf8(const std::vector<char32_t>& t, size_t b, size_t e) {
  std::string s;
  for (size_t k = b; k < e; ++k) attnum::model::append_utf8(s, t[k]);
  return s;
}

// Every match of a left-to-right scan, as strings.
std::vector<std::string> all(const std::string& pattern, const std::string& text) {
  const regex re(pattern);
  const std::vector<char32_t> t = cps(text);
  std::vector<regex::match> m;
  re.find_all(t, m);
  std::vector<std::string> out;
  for (const auto& x : m) out.push_back(utf8(t, x.begin, x.end));
  return out;
}

// The first match, or "(none)".
std::string first(const std::string& pattern, const std::string& text) {
  const std::vector<char32_t> t = cps(text);
  const auto m = regex(pattern).find(t, 0);
  return m ? utf8(t, m->begin, m->end) : "(none)";
}

using v = std::vector<std::string>;

TEST(regex_test, alternation_is_leftmost_first_not_longest) {
  EXPECT_EQ(first("a|ab", "ab"), "a");  // the first alternative that matches wins
  EXPECT_EQ(first("ab|a", "ab"), "ab");
  EXPECT_EQ(first("(a|ab)(c|bcd)", "abcd"), "abcd");  // backtracks into the group: a, then bcd
  EXPECT_EQ(first("x|b", "abc"), "b");                // leftmost start first
}

TEST(regex_test, quantifiers_greedy_lazy_counted) {
  EXPECT_EQ(first("a+", "baaa"), "aaa");
  EXPECT_EQ(first("a+?", "baaa"), "a");
  EXPECT_EQ(first("a*b", "aaab"), "aaab");
  EXPECT_EQ(first("a?a", "a"), "a");  // ? gives its character back
  EXPECT_EQ(all("a{2}", "aaaaa"), (v{"aa", "aa"}));
  EXPECT_EQ(all("a{2,3}", "aaaaa"), (v{"aaa", "aa"}));
  EXPECT_EQ(all("a{2,3}?", "aaaaa"), (v{"aa", "aa"}));
  EXPECT_EQ(all("a{2,}", "aaaaa a"), (v{"aaaaa"}));
  EXPECT_EQ(all("\\p{N}{1,3}", "1234567"), (v{"123", "456", "7"}));
}

TEST(regex_test, possessive_and_atomic_never_give_back) {
  EXPECT_EQ(first("a*+a", "aaa"), "(none)");
  EXPECT_EQ(first("a++b", "aab"), "aab");
  EXPECT_EQ(first("(?>a*)a", "aaa"), "(none)");
  EXPECT_EQ(first("(?>a|ab)c", "abc"), "(none)");  // the atomic group keeps "a"; "c" then fails at "b"
  EXPECT_EQ(first("(?:a|ab)c", "abc"), "abc");
  EXPECT_EQ(first("a?+a", "a"), "(none)");
}

TEST(regex_test, lookahead) {
  EXPECT_EQ(first("\\s+(?!\\S)", "a   b"), "  ");  // the last space is left to precede "b"
  EXPECT_EQ(first("\\s+(?!\\S)", "a   "), "   ");  // at the end nothing follows
  EXPECT_EQ(first("\\s+(?!\\S)", "a b"), "(none)");
  EXPECT_EQ(first("a(?=b)", "acab"), "a");
  EXPECT_EQ(all("a(?=b)", "acab ab"), (v{"a", "a"}));
  EXPECT_EQ(first("a(?!b)", "abac"), "a");
  EXPECT_EQ(regex("a(?!b)").find(cps("abac"), 0)->begin, 2u);
}

TEST(regex_test, classes_by_general_category) {
  EXPECT_EQ(all("\\p{Lu}", "aÉéZ"), (v{"É", "Z"}));
  EXPECT_EQ(all("\\p{Ll}", "aÉéZ"), (v{"a", "é"}));
  EXPECT_EQ(all("\\p{Lt}", "ǅx"), (v{"ǅ"}));  // U+01C5
  EXPECT_EQ(all("\\p{Lm}", "ʰx"), (v{"ʰ"}));  // U+02B0
  EXPECT_EQ(all("\\p{Lo}", "aあ"), (v{"あ"}));
  EXPECT_EQ(all("\\p{M}", "e\u0301"), (v{"\u0301"}));  // combining acute, Mn
  EXPECT_EQ(all("\\p{P}", "a«b!"), (v{"«", "!"}));
  EXPECT_EQ(all("\\p{S}", "5€+"), (v{"€", "+"}));
  EXPECT_EQ(all("\\p{N}", "a½٣7"), (v{"½", "٣", "7"}));  // No, Nd (Arabic-Indic three), Nd
  EXPECT_EQ(all("\\pL+", "ab1c"), (v{"ab", "c"}));
  EXPECT_EQ(all("\\P{L}+", "ab12c!"), (v{"12", "!"}));
  EXPECT_EQ(all("\\p{^L}+", "ab12c!"), (v{"12", "!"}));
  EXPECT_EQ(all("\\d", "a½٣7"), (v{"٣", "7"}));                                       // Nd only
  EXPECT_EQ(all("\\w+", "a_b\u0301½ c-d"), (v{"a_b\u0301½", "c", "d"}));              // L, Pc, M, N
  EXPECT_EQ(all("\\s", "a\u0085b\u3000c\u200Bd\te"), (v{"\u0085", "\u3000", "\t"}));  // U+200B is Cf
  EXPECT_EQ(all("[^\\s\\p{L}\\p{N}]+", "ab, c1 !?"), (v{",", "!?"}));
  EXPECT_EQ(all("[^\\r\\n\\p{L}\\p{N}]?\\p{L}+", "\nab cd"), (v{"ab", " cd"}));
  EXPECT_EQ(all("[a-c]+", "abcdcba"), (v{"abc", "cba"}));
  EXPECT_EQ(all("[-a]+", "x-a-"), (v{"-a-"}));
  EXPECT_EQ(all(".", "a\nb"), (v{"a", "b"}));  // . is any code point but \n
  EXPECT_EQ(all("\\x{1F600}|\\u00e9|\\x41", "é😀A"), (v{"é", "😀", "A"}));
  EXPECT_EQ(all("\\.\\+", "a.+b"), (v{".+"}));
}

TEST(regex_test, case_insensitive_groups_fold_case) {
  EXPECT_EQ(all("(?i:'s|'ll)", "'S 'ſ 'Ll 's"), (v{"'S", "'ſ", "'Ll", "'s"}));  // U+017F folds to s
  EXPECT_EQ(all("(?i:k)", "kK\u212A"), (v{"k", "K", "\u212A"}));                // Kelvin sign folds to k
  EXPECT_EQ(all("'s", "'S's"), (v{"'s"}));                                      // no (?i): exact
  EXPECT_EQ(all("(?i)ab|c", "ABC"), (v{"AB", "C"}));                            // (?i) to the group's end
  EXPECT_EQ(all("ab(?i)c|def", "abC DEF abDEF"), (v{"abC", "abDEF"}));          // = ab(?i:c|def)
  EXPECT_EQ(all("(?i:[a-c]+)", "xABcy"), (v{"ABc"}));
  EXPECT_EQ(all("(?i:[^a])", "aAb"), (v{"b"}));  // fold, then negate
  EXPECT_EQ(all("(?i:a(?-i:b))", "ABAb"), (v{"Ab"}));
}

// The split patterns on texts whose splits follow from each alternative in order.
TEST(regex_test, qwen2_llama3_gpt2_split_patterns) {
  using attnum::model::kLlama3Split;
  using attnum::model::kQwen2Split;
  const std::string text = "Hello world's 1234  x   \n  y 'LL ok?!  ";
  const v qwen2 = {"Hello", " world", "'s", " ",  "1",  "2",  "3",   "4",  " ",
                   " x",    "   \n",  " ",  " y", " '", "LL", " ok", "?!", "  "};
  EXPECT_EQ(all(kQwen2Split, text), qwen2);
  v llama3 = qwen2;
  llama3.erase(llama3.begin() + 4, llama3.begin() + 8);
  llama3.insert(llama3.begin() + 4, {"123", "4"});
  EXPECT_EQ(all(kLlama3Split, text), llama3);
  EXPECT_EQ(all(kQwen2Split, "a\r\n\r\nb.\n\nc"), (v{"a", "\r\n\r\n", "b", ".\n\n", "c"}));
  EXPECT_EQ(all(kQwen2Split, "I'M HERE"), (v{"I", "'M", " HERE"}));
  const char* gpt2 = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";
  EXPECT_EQ(all(gpt2, "Hello  world 42's\n\nok"), (v{"Hello", " ", " world", " 42", "'s", "\n", "\n", "ok"}));
}

TEST(regex_test, can_match_empty) {
  EXPECT_TRUE(regex("a*").can_match_empty());
  EXPECT_TRUE(regex("a|").can_match_empty());
  EXPECT_TRUE(regex("(?=a)").can_match_empty());
  EXPECT_FALSE(regex("a+|b").can_match_empty());
  EXPECT_FALSE(regex(attnum::model::kQwen2Split).can_match_empty());
}

TEST(regex_test, unsupported_and_malformed_patterns_are_refused_by_name) {
  const std::pair<const char*, const char*> cases[] = {
      {"^a", "anchor"},
      {"a$", "anchor"},
      {"\\bx", "anchor"},
      {"\\Ax", "anchor"},
      {"(?<=a)b", "lookbehind"},
      {"(?<!a)b", "lookbehind"},
      {"(?<n>a)", "named group"},
      {"(a)\\1", "escape '\\1'"},
      {"[[:alpha:]]", "nested class"},
      {"[a&&b]", "intersection"},
      {"\\p{Han}", "\\p{Han}"},
      {"\\p{L", "'}'"},
      {"a{2,1}", "m < n"},
      {"a{1001}", "above 1000"},
      {"a{x}", "'{'"},
      {"(a", "')'"},
      {"a)", "unmatched ')'"},
      {"[a", "']'"},
      {"*a", "nothing to repeat"},
      {"a**", "quantifier on a quantifier"},
      {"(a*)*", "can match empty"},
      {"\\p{N}{1,3}+", "'+' after {n,m}"},
      {"(?m:a)", "(?m"},
      {"(?#c)", "group kind"},
      {"a(?=b)*", "quantifier on a lookahead"},
      {"\\q", "escape '\\q'"},
      {"[z-a]", "end precedes"},
      {"[\\s-z]", "starts at a class"},
      {"\\x{110000}", "\\x{"},
      {"a\\", "trailing"},
      {"\xff", "UTF-8"},
  };
  for (const auto& [pattern, fragment] : cases) {
    try {
      regex re(pattern);
      ADD_FAILURE() << "accepted: " << pattern;
    } catch (const attnum::error& e) {
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << pattern << ": " << e.what();
    }
  }
  std::string deep;
  for (int k = 0; k < 100; ++k) deep += "(?:";
  deep += "a";
  for (int k = 0; k < 100; ++k) deep += ")";
  EXPECT_THROW(regex{deep}, attnum::error);
}

// Long inputs: no recursion on the text, and the visited set keeps a catastrophic pattern
// (exponential for a plain backtracker) to a bounded number of steps.
TEST(regex_test, long_inputs_and_catastrophic_patterns_finish) {
  std::vector<char32_t> spaces(1'000'000, U' ');
  auto m = regex("\\s+(?!\\S)").find(spaces, 0);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->end, spaces.size());
  spaces.push_back(U'x');
  std::vector<regex::match> all_m;
  regex(attnum::model::kQwen2Split).find_all(spaces, all_m);
  ASSERT_EQ(all_m.size(), 2u);  // the run less one space, then " x"
  EXPECT_EQ(all_m[0].end, 999'999u);
  const auto t0 = std::chrono::steady_clock::now();
  const std::vector<char32_t> as(20000, U'a');  // also no quadratic rescan from every start
  EXPECT_FALSE(regex("(?:a|a)*b").find(as, 0));
  EXPECT_FALSE(regex("(?:a+)+b|(?:aa|a)+c").find(as, 0).has_value());
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 5.0);
}

TEST(regex_test, unicode_category_names) {
  EXPECT_STREQ(attnum::model::unicode_category_name(attnum::model::unicode_category(U'A')), "Lu");
  EXPECT_STREQ(attnum::model::unicode_category_name(attnum::model::unicode_category(U'\u00BD')), "No");
  EXPECT_STREQ(attnum::model::unicode_category_name(attnum::model::unicode_category(U'\U0010FFFF')), "Cn");
  EXPECT_STREQ(attnum::model::unicode_category_name(attnum::model::unicode_category(U' ')), "Zs");
}

}  // namespace
