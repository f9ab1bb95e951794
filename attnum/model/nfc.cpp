// NFC = canonical decomposition, canonical ordering, canonical composition (UAX #15 section 1.3);
// NFKC the same with the compatibility decompositions applied as well,
// with tables generated from Unicode data (gen_nfc_tables.py) and Hangul done algorithmically
// (Unicode 3.12: SBase AC00, LBase 1100, VBase 1161, TBase 11A7, LCount 19, VCount 21,
// TCount 28, NCount = VCount*TCount = 588, SCount = LCount*NCount = 11172).
#include "attnum/model/nfc.h"

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "attnum/model/utf8.h"

namespace attnum::model {
namespace {
#include "attnum/model/nfc_tables.inc"

constexpr char32_t kSBase = 0xAC00, kLBase = 0x1100, kVBase = 0x1161, kTBase = 0x11A7;
constexpr int kLCount = 19, kVCount = 21, kTCount = 28, kNCount = 588, kSCount = 11172;
constexpr char32_t kRawByte = 0x110000;  // invalid byte b is kept as kRawByte + b

int ccc(char32_t c) {
  auto it = std::lower_bound(std::begin(kCombiningClass), std::end(kCombiningClass), c,
                             [](const auto& p, char32_t v) { return p.first < v; });
  return it != std::end(kCombiningClass) && it->first == c ? it->second : 0;
}

void decompose(char32_t c, bool compat, std::vector<char32_t>& out) {
  if (c >= kSBase && c < kSBase + kSCount) {
    const int s = int(c - kSBase);
    out.push_back(kLBase + s / kNCount);
    out.push_back(kVBase + (s % kNCount) / kTCount);
    if (s % kTCount) out.push_back(kTBase + s % kTCount);
    return;
  }
  if (compat) {
    auto ct = std::lower_bound(std::begin(kCompatDecomp), std::end(kCompatDecomp), c,
                               [](const auto& e, char32_t v) { return e[0] < v; });
    if (ct != std::end(kCompatDecomp) && (*ct)[0] == c) {
      for (uint32_t k = 0; k < (*ct)[2]; ++k) decompose(kCompatChars[(*ct)[1] + k], compat, out);
      return;
    }
  }
  auto it =
      std::lower_bound(std::begin(kDecomp), std::end(kDecomp), c, [](const auto& e, char32_t v) { return e[0] < v; });
  if (it == std::end(kDecomp) || (*it)[0] != c) return out.push_back(c);
  decompose((*it)[1], compat, out);
  if ((*it)[2]) decompose((*it)[2], compat, out);
}

// Returns the primary composite of (a, b), or 0.
char32_t compose(char32_t a, char32_t b) {
  if (a >= kLBase && a < kLBase + kLCount && b >= kVBase && b < kVBase + kVCount)
    return kSBase + ((a - kLBase) * kVCount + (b - kVBase)) * kTCount;
  if (a >= kSBase && a < kSBase + kSCount && (a - kSBase) % kTCount == 0 && b > kTBase && b < kTBase + kTCount)
    return a + (b - kTBase);
  auto it =
      std::lower_bound(std::begin(kCompose), std::end(kCompose), std::pair(a, b),
                       [](const auto& e, const std::pair<char32_t, char32_t>& v) { return std::pair(e[0], e[1]) < v; });
  return it != std::end(kCompose) && (*it)[0] == a && (*it)[1] == b ? (*it)[2] : 0;
}

std::vector<char32_t> decode(std::string_view s) {
  std::vector<char32_t> out;
  for (size_t i = 0; i < s.size();) {
    const utf8_step u = decode_utf8_at(s, i);
    out.push_back(u.ok ? u.cp : kRawByte + u.cp);  // !ok: u.cp is the byte
    i += u.len;
  }
  return out;
}

void encode(char32_t c, std::string& out) {
  if (c >= kRawByte)
    out += char(c - kRawByte);
  else
    append_utf8(out, c);
}

std::string normalize(std::string_view utf8, bool compat) {
  // Fast path: below U+00C0 nothing decomposes canonically or combines; below U+00A0 nothing
  // has a compatibility decomposition.
  const unsigned char fast = compat ? 0xC2 : 0xC3;
  if (std::all_of(utf8.begin(), utf8.end(), [&](char ch) { return static_cast<unsigned char>(ch) < fast; }))
    return std::string(utf8);
  // 1. full canonical (and with compat, compatibility) decomposition
  std::vector<char32_t> d;
  for (char32_t c : decode(utf8)) {
    if (c >= kRawByte)
      d.push_back(c);
    else
      decompose(c, compat, d);
  }
  // 2. canonical ordering: stable sort of each run of non-starters by combining class
  for (size_t i = 0; i < d.size();) {
    if (ccc(d[i]) == 0) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < d.size() && ccc(d[j]) != 0) ++j;
    std::stable_sort(d.begin() + i, d.begin() + j, [](char32_t a, char32_t b) { return ccc(a) < ccc(b); });
    i = j;
  }
  // 3. canonical composition: a character joins the last starter unless blocked
  std::vector<char32_t> out;
  int starter = -1, last_class = 256;
  for (char32_t c : d) {
    const int cc = c >= kRawByte ? 0 : ccc(c);
    if (starter >= 0 && (last_class < cc || last_class == 0)) {
      if (const char32_t comp = compose(out[starter], c); comp && c < kRawByte) {
        out[starter] = comp;
        continue;
      }
    }
    if (cc == 0) starter = int(out.size());
    last_class = cc;
    out.push_back(c);
  }
  std::string s;
  for (char32_t c : out) encode(c, s);
  return s;
}
}  // namespace

std::string nfc(std::string_view utf8) { return normalize(utf8, false); }

std::string nfkc(std::string_view utf8) { return normalize(utf8, true); }

}  // namespace attnum::model
