// llama.cpp's SPM tokenizer, written from ggml-org/llama.cpp@c392e5094 (cited below as "V" for
// src/llama-vocab.cpp and "U" for src/unicode.cpp, with line numbers at that commit). Every step
// follows the reference: the same symbol list, the same priority queue and comparator, the same
// re-segmentation through rev_merge, so the ids are llama.cpp's, ties included.
#include "attnum/model/tokenizer_llamacpp_spm.h"

#include <algorithm>
#include <queue>
#include <unordered_map>
#include <utility>

#include "attnum/core/error.h"

namespace attnum::model {
namespace {

// llama_token_type (llama.cpp include/llama.h).
enum : int { kUndefined = 0, kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6 };

const std::string kEscapedSpace = "\xe2\x96\x81";  // U+2581, V:2286 llama_escape_whitespace

// U:22 unicode_len_utf8: the length a lead byte announces (a continuation byte counts as 1).
size_t utf8_len(char c) {
  static const size_t lookup[] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return lookup[static_cast<uint8_t>(c) >> 4];
}

class spm_tokenizer final : public tokenizer {
 public:
  spm_tokenizer(spm_vocab v, std::string what, const std::string& source) : v_(std::move(v)), what_(std::move(what)) {
    source_ = source;
    for (size_t i = 0; i < v_.tokens.size(); ++i) to_id_.emplace(v_.tokens[i], int(i));
    // V:1955-1967: the special tokens cache holds control, user-defined and unknown tokens,
    // sorted longest text first (std::sort with the same comparator over ids in increasing order).
    for (int id = 0; id < size(); ++id) {
      const int t = v_.types[id];
      if (t == kControl || t == kUserDefined || t == kUnknown) special_.push_back(id);
    }
    std::sort(special_.begin(), special_.end(),
              [this](int a, int b) { return v_.tokens[a].size() > v_.tokens[b].size(); });
  }

  std::vector<int> encode(std::string_view text) const override {
    std::vector<int> out;
    // V:2323-2326: an empty text has no fragment (and, without BOS, no token).
    if (text.empty()) return out;
    const std::vector<fragment> frags = partition(text);
    // V:2335: "prefix with space if first token"; V:2346-2362: each raw fragment gets a space
    // in front (add_space_prefix) when it starts the text or follows a special token, has its
    // spaces escaped to U+2581 and is tokenized on its own.
    bool is_prev_special = true;
    for (const fragment& f : frags) {
      if (f.token >= 0) {  // V:2363-2365
        out.push_back(f.token);
        is_prev_special = true;
        continue;
      }
      std::string s;
      if (v_.add_space_prefix && is_prev_special) s = " ";
      s += text.substr(f.offset, f.length);
      std::string escaped;
      for (char c : s) c == ' ' ? void(escaped += kEscapedSpace) : void(escaped += c);
      session(*this, escaped).tokenize(out);
      is_prev_special = false;
    }
    return out;
  }

  // V:2489-2572 token_to_piece(token, lstrip, special = true): control and unknown tokens and
  // user-defined ones as their text, normal tokens with U+2581 back to spaces, byte tokens as their
  // byte, unused and undefined ones as nothing. V:2595, 2613-2614 llama_detokenize strips one leading
  // space from the first token when add_space_prefix is set.
  std::string decode(int prev, int id) const override {
    if (id < 0 || id >= size()) fail("token id {} outside the vocabulary (0..{})", id, size() - 1);
    const std::string& text = v_.tokens[id];
    std::string piece;
    switch (v_.types[id]) {
      case kUnknown:
      case kControl:
      case kUserDefined:
        piece = text;
        break;
      case kNormal:
        for (size_t i = 0; i < text.size();) {
          if (text.compare(i, kEscapedSpace.size(), kEscapedSpace) == 0) {
            piece += ' ';
            i += kEscapedSpace.size();
          } else {
            piece += text[i++];
          }
        }
        break;
      case kByte:  // V:2100 token_to_byte: strtol of text.substr(3, 2), base 16
        piece = std::string(1, char(std::stoi(text.substr(3, 2), nullptr, 16)));
        break;
      default:
        break;
    }
    if (prev < 0 && v_.add_space_prefix && !piece.empty() && piece[0] == ' ') piece.erase(0, 1);
    return piece;
  }

  int size() const override { return static_cast<int>(v_.tokens.size()); }

 private:
  struct fragment {
    size_t offset = 0, length = 0;
    int token = -1;  // >= 0: a special token; -1: raw text [offset, offset + length)
  };

  // V:2149-2267 tokenizer_st_partition with parse_special = false: control and unknown tokens are
  // skipped (V:2155), so only user-defined tokens split the text, longest first; each raw fragment
  // is cut at every occurrence, left to right. (llama.cpp sets the LSTRIP/RSTRIP attributes only
  // for jina-v2 and Phi-3 vocabularies, V:2026-2038; the GGUF reader refuses Phi-3 names.)
  std::vector<fragment> partition(std::string_view text) const {
    std::vector<fragment> frags = {{0, text.size(), -1}};
    for (int id : special_) {
      if (v_.types[id] != kUserDefined) continue;
      const std::string& t = v_.tokens[id];
      std::vector<fragment> next;
      for (const fragment& f : frags) {
        if (f.token >= 0) {
          next.push_back(f);
          continue;
        }
        size_t base = f.offset, len = f.length;
        while (len > 0) {
          const size_t match = text.find(t, base);
          if (match == std::string_view::npos || match + t.size() > base + len) {
            next.push_back({base, len, -1});
            break;
          }
          if (match > base) next.push_back({base, match - base, -1});
          next.push_back({0, 0, id});
          const size_t end = match + t.size();
          len = base + len - end;
          base = end;
        }
      }
      frags = std::move(next);
    }
    return frags;
  }

  // V:110-233 llm_tokenizer_spm_session over one escaped fragment.
  class session {
   public:
    session(const spm_tokenizer& tok, const std::string& text) : tok_(tok), text_(text) {}

    void tokenize(std::vector<int>& output) {
      // V:115-127: split into UTF-8 characters (a truncated last one keeps what is left).
      int index = 0;
      size_t offs = 0;
      while (offs < text_.size()) {
        symbol sym;
        const size_t len = utf8_len(text_[offs]);
        sym.text = offs;
        sym.n = std::min(len, text_.size() - offs);
        offs += sym.n;
        sym.prev = index - 1;
        sym.next = offs == text_.size() ? -1 : index + 1;
        index++;
        symbols_.push_back(sym);
      }
      // V:129-132: seed the queue with every adjacent pair.
      for (int i = 1; i < int(symbols_.size()); ++i) try_add_bigram(i - 1, i);
      // V:134-163: merge the best pair while any is left; skip pairs whose symbols changed.
      while (!queue_.empty()) {
        const bigram b = queue_.top();
        queue_.pop();
        symbol& left = symbols_[b.left];
        symbol& right = symbols_[b.right];
        if (left.n == 0 || right.n == 0 || left.n + right.n != b.size) continue;
        left.n += right.n;
        right.n = 0;
        left.next = right.next;
        if (right.next >= 0) symbols_[right.next].prev = b.left;
        try_add_bigram(left.prev, b.left);
        try_add_bigram(b.left, left.next);
      }
      // V:165-168
      for (int i = 0; i != -1; i = symbols_[i].next) resegment(symbols_[i], output);
    }

   private:
    struct symbol {
      int prev = -1, next = -1;
      size_t text = 0;  // offset into text_
      size_t n = 0;
    };
    struct bigram {
      int left = 0, right = 0;
      float score = 0;
      size_t size = 0;
    };
    // V:93-98 llm_bigram_spm::comparator: the highest score first, then the leftmost.
    struct comparator {
      bool operator()(const bigram& l, const bigram& r) const {
        return (l.score < r.score) || (l.score == r.score && l.left > r.left);
      }
    };

    // V:172-196: a symbol that is a token is that token; otherwise the pair it was merged from
    // (rev_merge, by text), or else its bytes (V:2783-2800 byte_to_token: "<0xXX>", else the
    // byte itself as a one-character token).
    void resegment(const symbol& sym, std::vector<int>& output) {
      const std::string text = text_.substr(sym.text, sym.n);
      if (auto it = tok_.to_id_.find(text); it != tok_.to_id_.end()) {
        output.push_back(it->second);
        return;
      }
      const auto p = rev_merge_.find(text);
      if (p == rev_merge_.end()) {
        for (char c : text) output.push_back(tok_.byte_to_token(static_cast<uint8_t>(c)));
        return;
      }
      const std::pair<int, int> halves = p->second;
      resegment(symbols_[halves.first], output);
      resegment(symbols_[halves.second], output);
    }

    // V:198-225: queue a pair whose concatenation is a token, scored by that token.
    void try_add_bigram(int left, int right) {
      if (left == -1 || right == -1) return;
      const std::string text = text_.substr(symbols_[left].text, symbols_[left].n + symbols_[right].n);
      const auto it = tok_.to_id_.find(text);
      if (it == tok_.to_id_.end()) return;
      queue_.push({left, right, tok_.v_.scores[it->second], text.size()});
      rev_merge_[text] = std::make_pair(left, right);
    }

    const spm_tokenizer& tok_;
    const std::string& text_;
    std::vector<symbol> symbols_;
    std::priority_queue<bigram, std::vector<bigram>, comparator> queue_;
    std::unordered_map<std::string, std::pair<int, int>> rev_merge_;  // V:233 (a std::map there: same lookups)
  };

  // V:2783-2800 llama_vocab::byte_to_token for SPM. Where llama.cpp throws std::out_of_range
  // (token_to_id.at), this names the missing token.
  int byte_to_token(uint8_t ch) const {
    static const char* hex = "0123456789ABCDEF";
    const char buf[7] = {'<', '0', 'x', hex[ch >> 4], hex[ch & 15], '>', 0};
    if (auto it = to_id_.find(buf); it != to_id_.end()) return it->second;
    const char buf2[2] = {char(ch), 0};  // a C string: empty for byte 0
    if (auto it = to_id_.find(buf2); it != to_id_.end()) return it->second;
    fail("{}.tokens: no token {} (nor the byte itself) for the byte fallback of byte 0x{:02X}", what_, buf, ch);
  }

  spm_vocab v_;
  std::string what_;
  std::unordered_map<std::string, int> to_id_;
  std::vector<int> special_;
};

}  // namespace

std::unique_ptr<tokenizer> make_spm_tokenizer(spm_vocab v, const std::string& what, const std::string& source) {
  return std::make_unique<spm_tokenizer>(std::move(v), what, source);
}

}  // namespace attnum::model
