#pragma once
// UTF-8: one decoding step and the encoding of a code point, shared by the tokenizers and the NFC normalizer, so they
// agree on what is a valid sequence. Lenient like the Python/Rust tokenizers' byte-level handling: the lead byte fixes
// the length (2, 3 or 4), every continuation byte must be 10xxxxxx; overlong forms and surrogates are not rejected (the
// callers only need a consistent split).
#include <cstddef>
#include <string>
#include <string_view>

namespace attnum::model {

/// The code point starting at byte i of s: `len` bytes when `ok`; when !ok (a stray
/// continuation byte, a bad lead byte, a sequence cut short) the caller keeps byte s[i] alone.
struct utf8_step {
  char32_t cp = 0;
  int len = 1;
  bool ok = false;
};

inline utf8_step decode_utf8_at(std::string_view s, size_t i) {
  const unsigned char b = s[i];
  const int len = b < 0x80 ? 1 : (b >> 5) == 6 ? 2 : (b >> 4) == 14 ? 3 : (b >> 3) == 30 ? 4 : 0;
  bool ok = len > 0 && i + len <= s.size();
  char32_t cp = len == 1 ? b : len == 2 ? (b & 0x1f) : len == 3 ? (b & 0x0f) : (b & 0x07);
  for (int k = 1; ok && k < len; ++k) {
    const unsigned char c = s[i + k];
    ok = (c & 0xC0) == 0x80;
    cp = (cp << 6) | (c & 0x3f);
  }
  return ok ? utf8_step{cp, len, true} : utf8_step{char32_t(b), 1, false};
}

/// Appends code point c (< 0x110000) to out as UTF-8, in 1 to 4 bytes.
inline void append_utf8(std::string& out, char32_t c) {
  if (c < 0x80) {
    out += char(c);
  } else if (c < 0x800) {
    out += char(0xC0 | (c >> 6));
    out += char(0x80 | (c & 0x3f));
  } else if (c < 0x10000) {
    out += char(0xE0 | (c >> 12));
    out += char(0x80 | ((c >> 6) & 0x3f));
    out += char(0x80 | (c & 0x3f));
  } else {
    out += char(0xF0 | (c >> 18));
    out += char(0x80 | ((c >> 12) & 0x3f));
    out += char(0x80 | ((c >> 6) & 0x3f));
    out += char(0x80 | (c & 0x3f));
  }
}

}  // namespace attnum::model
