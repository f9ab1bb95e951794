// The regex engine against the hand-written splitter that implemented the Qwen2 and Llama 3
// split patterns before it (attnum/model/tokenizer_bpe.cpp at commit 8ce799f, match_at, kept here
// as the oracle with its letter/number tests on the same Unicode tables), on the three default
// books: every split must agree.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "attnum/model/loader.h"
#include "attnum/model/regex.h"
#include "attnum/model/tokenizer.h"
#include "attnum/model/utf8.h"

namespace {

using attnum::model::unicode_category;
bool is_letter(char32_t c) { return unicode_category(c) <= 4; }                               // Lu Ll Lt Lm Lo
bool is_number(char32_t c) { return unicode_category(c) >= 8 && unicode_category(c) <= 10; }  // Nd Nl No
bool is_space(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}
bool is_crlf(char32_t c) { return c == '\r' || c == '\n'; }

// The old splitter: the end of the match starting at i; max_digits 1 (Qwen2) or 3 (Llama 3).
size_t match_at(const std::vector<char32_t>& u, size_t i, int max_digits) {
  const size_t n = u.size();
  auto cp = [&](size_t k) { return k < n ? u[k] : char32_t(0); };
  auto lower = [&](size_t k) { return k < n && cp(k) < 0x80 ? char32_t(cp(k) | 0x20) : cp(k); };
  if (cp(i) == '\'') {
    const char32_t a = lower(i + 1), b = lower(i + 2);
    if (a == 's' || a == 0x17F || a == 't' || a == 'm' || a == 'd') return i + 2;
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return i + 3;
  }
  auto letters_from = [&](size_t k) {
    while (k < n && is_letter(cp(k))) ++k;
    return k;
  };
  if (i < n && !is_crlf(cp(i)) && !is_letter(cp(i)) && !is_number(cp(i)) && i + 1 < n && is_letter(cp(i + 1)))
    return letters_from(i + 1);
  if (is_letter(cp(i))) return letters_from(i);
  if (is_number(cp(i))) {
    size_t k = i + 1;
    while (k < n && k - i < size_t(max_digits) && is_number(cp(k))) ++k;
    return k;
  }
  auto punct = [&](size_t k) { return k < n && !is_space(cp(k)) && !is_letter(cp(k)) && !is_number(cp(k)); };
  const size_t p0 = cp(i) == ' ' && punct(i + 1) ? i + 1 : i;
  if (punct(p0)) {
    size_t k = p0;
    while (punct(k)) ++k;
    while (k < n && is_crlf(cp(k))) ++k;
    return k;
  }
  size_t j = i;
  while (j < n && is_space(cp(j))) ++j;
  if (j == i) return i + 1;
  for (size_t k = j; k > i; --k)
    if (is_crlf(cp(k - 1))) return k;
  if (j == n) return j;
  if (j - i >= 2) return j - 1;
  return j;
}

TEST(regex_books_test, engine_and_hand_written_split_agree_on_the_books) {
  std::vector<std::string> books;
  try {
    books = attnum::model::default_texts();
  } catch (const std::exception& e) {
    GTEST_SKIP() << e.what();
  }
  for (const auto& [pattern, digits] :
       {std::pair{attnum::model::kQwen2Split, 1}, std::pair{attnum::model::kLlama3Split, 3}}) {
    const attnum::model::regex re(pattern);
    for (const std::string& path : books) {
      std::ifstream f(path, std::ios::binary);
      const std::string text{std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
      std::vector<char32_t> u;
      for (size_t i = 0; i < text.size();) {
        const auto s = attnum::model::decode_utf8_at(text, i);
        u.push_back(s.ok ? s.cp : char32_t(0xDC00 + s.cp));
        i += size_t(s.len);
      }
      std::vector<attnum::model::regex::match> got;
      re.find_all(u, got);
      size_t at = 0, k = 0, mismatches = 0;
      for (; at < u.size() && k < got.size(); ++k) {
        const size_t want = match_at(u, at, digits);
        if (got[k].begin != at || got[k].end != want) {
          if (++mismatches <= 5)
            ADD_FAILURE() << path << ": code point " << at << ": engine [" << got[k].begin << ", " << got[k].end
                          << "), hand-written [" << at << ", " << want << ")";
          break;
        }
        at = want;
      }
      EXPECT_EQ(at, u.size()) << path << " (" << digits << ")";
      EXPECT_EQ(k, got.size()) << path;
      EXPECT_GT(got.size(), 50000u) << path;  // a book (about 90,000 to 130,000 pieces), not an empty file
    }
  }
}

}  // namespace
