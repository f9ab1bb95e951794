#pragma once
// Did-you-mean: the known names closest to a mistyped one (subcommands, presets, knobs,
// conditions, flags), by edit distance with adjacent transpositions, plus the names the word is a
// prefix of ("sage2" -> sage2-sm90, sage2-sm90-acc13). One helper for every message that names
// what was expected.
#include <algorithm>
#include <cctype>
#include <string>
#include <string_view>
#include <vector>

namespace attnum {

/// Optimal-string-alignment distance: insertions, deletions, substitutions and swaps of two
/// adjacent characters each cost 1; letters compare case-insensitively.
inline size_t edit_distance(std::string_view a, std::string_view b) {
  const size_t n = a.size(), m = b.size();
  auto same = [](char x, char y) {
    return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
  };
  std::vector<size_t> prev2(m + 1), prev(m + 1), cur(m + 1);
  for (size_t j = 0; j <= m; ++j) prev[j] = j;
  for (size_t i = 1; i <= n; ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= m; ++j) {
      const size_t sub = prev[j - 1] + (same(a[i - 1], b[j - 1]) ? 0 : 1);
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, sub});
      if (i > 1 && j > 1 && same(a[i - 1], b[j - 2]) && same(a[i - 2], b[j - 1]))
        cur[j] = std::min(cur[j], prev2[j - 2] + 1);
    }
    prev2.swap(prev);
    prev.swap(cur);
  }
  return prev[m];
}

/// Returns the known names closest to `word` (at most `max_n`): those at the smallest edit
/// distance, if it is within max(1, |word|/3) (at most 3), with the names `word` (three characters
/// or more) is a prefix of counted as within it and listed first; ties in the order given.
/// Empty when none is close.
inline std::vector<std::string> closest_names(std::string_view word, const std::vector<std::string>& known,
                                              size_t max_n = 3) {
  const size_t limit = std::max<size_t>(1, std::min<size_t>(word.size() / 3, 3));
  struct hit {
    size_t d;
    bool prefix;
    size_t i;
  };
  std::vector<hit> hits;
  for (size_t i = 0; i < known.size(); ++i) {
    if (known[i] == word) continue;
    size_t d = edit_distance(word, known[i]);
    const bool prefix =
        word.size() >= 3 && known[i].size() > word.size() && known[i].compare(0, word.size(), word) == 0;
    if (prefix) d = std::min(d, limit);
    if (d <= limit) hits.push_back({d, prefix, i});
  }
  std::stable_sort(hits.begin(), hits.end(),
                   [](const hit& x, const hit& y) { return x.d != y.d ? x.d < y.d : x.prefix > y.prefix; });
  std::vector<std::string> out;
  for (const hit& h : hits) {
    if (out.size() == max_n || h.d != hits.front().d) break;
    out.push_back(known[h.i]);
  }
  return out;
}

/// Returns "did you mean 'a'?" or "did you mean 'a', 'b' or 'c'?", or "" when no name is close.
inline std::string did_you_mean(std::string_view word, const std::vector<std::string>& known) {
  const auto c = closest_names(word, known);
  if (c.empty()) return {};
  std::string s = "did you mean ";
  for (size_t i = 0; i < c.size(); ++i) s += (i == 0 ? "" : i + 1 == c.size() ? " or " : ", ") + ("'" + c[i] + "'");
  return s + "?";
}

}  // namespace attnum
