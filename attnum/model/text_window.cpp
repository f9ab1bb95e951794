#include "attnum/model/text_window.h"

#include <fmt/format.h>

#include <cctype>

#include "attnum/core/error.h"

namespace attnum::model {
namespace {

// Lines as [begin, end) without the line break.
template <typename F>
void for_lines(std::string_view t, size_t from, size_t to, F&& f) {
  for (size_t b = from; b < to;) {
    size_t e = t.find('\n', b);
    if (e == std::string_view::npos || e > to) e = to;
    size_t le = e;
    if (le > b && t[le - 1] == '\r') --le;
    if (!f(b, le)) return;
    b = e + 1;
  }
}

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

bool is_heading(std::string_view line) {
  bool letter = false;
  for (char c : line) {
    const auto u = static_cast<unsigned char>(c);
    if (std::islower(u)) return false;
    letter = letter || std::isupper(u);
  }
  if (!letter) return false;
  for (size_t i = 0; i < line.size();) {
    while (i < line.size() && !std::isalpha(static_cast<unsigned char>(line[i]))) ++i;
    size_t j = i;
    while (j < line.size() && std::isalpha(static_cast<unsigned char>(line[j]))) ++j;
    const std::string_view w = line.substr(i, j - i);
    if (w == "CHAPTER" || w == "ADVENTURE" || w == "BOOK" || w == "PART") return true;
    i = j;
  }
  return false;
}

}  // namespace

byte_range body_range(std::string_view t) {
  byte_range r{0, t.size()};
  bool marked = false;
  for_lines(t, 0, t.size(), [&](size_t b, size_t e) {
    if (!starts_with(t.substr(b, e - b), "*** START OF")) return true;
    r.begin = std::min(t.size(), t.find('\n', e) == std::string_view::npos ? t.size() : t.find('\n', e) + 1);
    marked = true;
    return false;
  });
  for_lines(t, r.begin, t.size(), [&](size_t b, size_t e) {
    if (!starts_with(t.substr(b, e - b), "*** END OF")) return true;
    r.end = b;
    return false;
  });
  // A Project Gutenberg text whose header was cut off (as in Debian's copies of the default
  // books) still opens with its "Produced by ..." credit: its front matter is skipped the same way.
  if (!marked) {
    const size_t first = t.find_first_not_of(" \t\r\n");
    marked = first != std::string_view::npos && starts_with(t.substr(first), "Produced by");
  }
  if (marked)
    for_lines(t, r.begin, r.end, [&](size_t b, size_t e) {
      if (!is_heading(t.substr(b, e - b))) return true;
      r.begin = b;
      return false;
    });
  return r;
}

std::vector<text_window> take_windows(std::string_view text, const tokenizer& tok, int bos, int n_tokens, int count,
                                      const std::string& what) {
  const byte_range body = body_range(text);
  const size_t need = static_cast<size_t>(n_tokens) + 1 - (bos >= 0 ? 1 : 0);  // tokens from the text
  std::vector<text_window> out;
  size_t b = body.begin;
  auto n_of = [&](size_t len) { return tok.encode(text.substr(b, len)).size(); };
  for (int w = 0; w < count; ++w) {
    const size_t avail = body.end - b;
    // the shortest length whose encoding holds `need` tokens: doubling, then bisection
    size_t hi = std::min(avail, need * 4);
    while (hi < avail && n_of(hi) < need) hi = std::min(avail, hi * 2);
    if (b >= body.end || n_of(hi) < need)
      fail(
          "{}: window {} of {} needs {} tokens from byte {}, but the text's body (bytes {}..{}, after the "
          "Project Gutenberg header and front matter, before its end marker) holds fewer",
          what, w + 1, count, need, b, body.begin, body.end);
    size_t lo = 0;  // n_of(lo) < need <= n_of(hi)
    while (hi - lo > 1) {
      const size_t mid = lo + (hi - lo) / 2;
      (n_of(mid) < need ? lo : hi) = mid;
    }
    // to the end of the word holding the last byte: the last token is one the whole word gives
    if (!std::isspace(static_cast<unsigned char>(text[b + hi - 1])))
      while (b + hi < body.end && !std::isspace(static_cast<unsigned char>(text[b + hi]))) ++hi;
    text_window win;
    win.byte_start = b, win.byte_end = b + hi;
    if (bos >= 0) win.ids.push_back(bos);
    const std::vector<int> ids = tok.encode(text.substr(b, hi));
    win.ids.insert(win.ids.end(), ids.begin(), ids.begin() + static_cast<long>(need));
    out.push_back(std::move(win));
    b += hi;  // the next window: from the next word
    while (b < body.end && std::isspace(static_cast<unsigned char>(text[b]))) ++b;
  }
  return out;
}

std::string text_window_json(const text_window& w) {
  return fmt::format("{{\"byte_start\": {}, \"byte_end\": {}}}", w.byte_start, w.byte_end);
}

int windows_per_text(int labels, int n_texts, int n_tokens) {
  if (n_texts <= 0 || n_tokens <= 0) return 1;
  const long per = static_cast<long>(n_texts) * n_tokens;
  return std::max(1, static_cast<int>((labels + per - 1) / per));
}

}  // namespace attnum::model
