// Hugging Face tokenizer.json, byte-level BPE (GPT-2 / Qwen2): added tokens split out first,
// then the pre-tokenizer split (Qwen2's or Llama 3's regex), then each piece's UTF-8 bytes mapped
// to GPT-2's printable byte alphabet and merged by rank (or, with ignore_merges, taken whole when
// the vocabulary has it). The split regex is implemented by hand (std::regex has no Unicode
// classes):
//   (?i:'s|'t|'re|'ve|'m|'ll|'d) | [^\r\n\p{L}\p{N}]?\p{L}+ | \p{N} | ?[^\s\p{L}\p{N}]+[\r\n]*
//   | \s*[\r\n]+ | \s+(?!\S) | \s+
// (Llama 3: \p{N}{1,3} for \p{N}) with leftmost-first alternation (Oniguruma semantics, as the
// tokenizers library uses).
#include <algorithm>
#include <filesystem>
#include <mutex>
#include <queue>
#include <nlohmann/json.hpp>
#include <unordered_map>
#include <utility>

#include "attnum/core/error.h"
#include "attnum/core/file.h"
#include "attnum/io/json_file.h"
#include "attnum/model/nfc.h"
#include "attnum/model/tokenizer.h"
#include "attnum/model/utf8.h"
#include "attnum/model/weights.h"

namespace attnum::model {
namespace {
#include "attnum/model/unicode_tables.inc"

template <size_t N>
bool in_ranges(const std::pair<char32_t, char32_t> (&r)[N], char32_t c) {
  auto it = std::upper_bound(std::begin(r), std::end(r), c,
                             [](char32_t v, const auto& p) { return v < p.first; });
  return it != std::begin(r) && c <= std::prev(it)->second;
}
bool is_letter(char32_t c) { return c < 0x80 ? ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') : in_ranges(kLetterRanges, c); }
bool is_number(char32_t c) { return c < 0x80 ? (c >= '0' && c <= '9') : in_ranges(kNumberRanges, c); }
// Unicode White_Space (what \s means in Oniguruma and Rust regex).
bool is_space(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
         c == 0x205F || c == 0x3000;
}
bool is_crlf(char32_t c) { return c == '\r' || c == '\n'; }

// Decodes UTF-8; an invalid byte becomes its own unit (value 0xDC00 + byte, never L/N/space).
struct unit {
  char32_t cp;
  size_t begin, end;  // byte range
};
std::vector<unit> decode_utf8(std::string_view s) {
  std::vector<unit> out;
  for (size_t i = 0; i < s.size();) {
    const utf8_step u = decode_utf8_at(s, i);
    out.push_back({u.ok ? u.cp : char32_t(0xDC00 + u.cp), i, i + size_t(u.len)});  // !ok: u.cp is the byte
    i += u.len;
  }
  return out;
}

// The split regexes recognised in a tokenizer.json pre_tokenizer: Qwen2's, and Llama 3's, which
// is the same except for \p{N}{1,3} (digits in runs of up to three) instead of \p{N}.
constexpr const char* kQwen2Split =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
constexpr const char* kLlama3Split =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

// Returns the end (unit index) of the regex match starting at i (> i: every position matches).
// max_digits: 1 (Qwen2's \p{N}) or 3 (Llama 3's \p{N}{1,3}).
size_t match_at(const std::vector<unit>& u, size_t i, int max_digits) {
  const size_t n = u.size();
  auto cp = [&](size_t k) { return k < n ? u[k].cp : char32_t(0); };
  auto lower = [&](size_t k) { return k < n && cp(k) < 0x80 ? char32_t(cp(k) | 0x20) : cp(k); };
  // 1. contractions, case-insensitive ('ſ' U+017F folds to 's')
  if (cp(i) == '\'') {
    const char32_t a = lower(i + 1), b = lower(i + 2);
    if (a == 's' || a == 0x17F || a == 't' || a == 'm' || a == 'd') return i + 2;
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return i + 3;
  }
  auto letters_from = [&](size_t k) {
    while (k < n && is_letter(cp(k))) ++k;
    return k;
  };
  // 2. [^\r\n\p{L}\p{N}]?\p{L}+
  if (i < n && !is_crlf(cp(i)) && !is_letter(cp(i)) && !is_number(cp(i)) && i + 1 < n &&
      is_letter(cp(i + 1)))
    return letters_from(i + 1);
  if (is_letter(cp(i))) return letters_from(i);
  // 3. \p{N} or \p{N}{1,3} (greedy)
  if (is_number(cp(i))) {
    size_t k = i + 1;
    while (k < n && k - i < size_t(max_digits) && is_number(cp(k))) ++k;
    return k;
  }
  // 4.  ?[^\s\p{L}\p{N}]+[\r\n]*
  auto punct = [&](size_t k) { return k < n && !is_space(cp(k)) && !is_letter(cp(k)) && !is_number(cp(k)); };
  const size_t p0 = cp(i) == ' ' && punct(i + 1) ? i + 1 : i;
  if (punct(p0)) {
    size_t k = p0;
    while (punct(k)) ++k;
    while (k < n && is_crlf(cp(k))) ++k;
    return k;
  }
  // Whitespace run [i, j).
  size_t j = i;
  while (j < n && is_space(cp(j))) ++j;
  if (j == i) return i + 1;  // unreachable: every code point is L, N, space or punct
  // 5. \s*[\r\n]+ : ends after the last \r or \n of the run
  for (size_t k = j; k > i; --k)
    if (is_crlf(cp(k - 1))) return k;
  // 6. \s+(?!\S) : the run, minus its last unit when a non-space follows
  if (j == n) return j;
  if (j - i >= 2) return j - 1;
  // 7. \s+
  return j;
}

// Token ids are below this (the largest real vocabularies hold about 2^18 tokens); a larger id
// would make the id -> piece table a memory bomb.
constexpr int64_t kMaxTokenId = int64_t{1} << 24;

class bpe_tokenizer final : public tokenizer {
 public:
  explicit bpe_tokenizer(const std::string& path) {
    const std::string text = read_file(path);
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(text);
    } catch (const nlohmann::json::exception& e) {
      fail("{}: not valid JSON: {}", path, clip(e.what()));
    }
    init(j, path, fmt::format("{}:{}", std::filesystem::path(path).filename().string(),
                              fnv1a_hex(text.data(), text.size())));
  }
  // The tokenizer of a tokenizer.json document built elsewhere (make_bpe_tokenizer).
  bpe_tokenizer(const nlohmann::json& j, const std::string& what, const std::string& source) {
    init(j, what, source);
  }

 private:
  void init(const nlohmann::json& j, const std::string& path, const std::string& source) {
    try {
      load(j, path);
    } catch (const nlohmann::json::exception& e) {  // a field of the wrong type
      fail("{}: unexpected JSON content: {}", path, clip(e.what()));
    }
    // Longest added token first, so a prefix never shadows a longer one.
    std::sort(added_.begin(), added_.end(), [](auto& x, auto& y) { return x.first.size() > y.first.size(); });
    build_added_trie();
    int max_id = -1;
    for (const auto& [s, id] : vocab_) max_id = std::max(max_id, id);
    if (max_id < 0) fail("{}: model.vocab is empty", path);
    pieces_.resize(max_id + 1);
    for (const auto& [s, id] : vocab_) pieces_[id] = s;
    // GPT-2 bytes_to_unicode: printable bytes map to themselves, the others to U+0100 + k.
    int k = 0;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      const char32_t c = printable ? char32_t(b) : char32_t(0x100 + k++);
      byte_char_[b] = utf8(c);
      char_byte_[byte_char_[b]] = char(b);
    }
    source_ = source;
  }

 public:
  std::vector<int> encode(std::string_view text) const override {
    std::vector<int> ids;
    size_t start = 0;
    for (size_t i = 0; i < text.size();) {
      const auto* hit = added_at(text, i);
      if (!hit) {
        ++i;
        continue;
      }
      encode_plain(text.substr(start, i - start), ids);
      ids.push_back(hit->second);
      i += hit->first.size();
      start = i;
    }
    encode_plain(text.substr(start), ids);
    return ids;
  }

  std::string decode(int, int id) const override {
    if (id < 0 || id >= size()) fail("token id {} outside the vocabulary (0..{})", id, size() - 1);
    if (auto it = added_by_id_.find(id); it != added_by_id_.end()) return added_[it->second].first;
    std::string out;
    for (const unit& u : decode_utf8(pieces_[id])) {
      auto it = char_byte_.find(pieces_[id].substr(u.begin, u.end - u.begin));
      if (it != char_byte_.end()) out += it->second;
    }
    return out;
  }

  int size() const override { return static_cast<int>(pieces_.size()); }

 private:
  static std::string json_quote(const std::string& s) { return nlohmann::json(s).dump(); }

  // A token id: an exact integer in [0, kMaxTokenId).
  static int token_id(const nlohmann::json& v, const std::string& path, const std::string& field) {
    if (!v.is_number_integer() || (v.is_number_unsigned() ? v.get<uint64_t>() >= uint64_t(kMaxTokenId)
                                                             : (v.get<int64_t>() < 0 || v.get<int64_t>() >= kMaxTokenId)))
      fail("{}: {} = {}: expected a token id, an integer in [0, {})", path, field, io::json_brief(v), kMaxTokenId);
    return static_cast<int>(v.get<int64_t>());
  }

  void load(const nlohmann::json& j, const std::string& path) {
    if (!j.contains("model") || !j["model"].is_object() || j["model"].value("type", "") != "BPE")
      fail("{}: model.type must be BPE", path);
    const auto& m = j["model"];
    if (!m.contains("vocab") || !m["vocab"].is_object() || !m.contains("merges") || !m["merges"].is_array())
      fail("{}: model.vocab (object) and model.merges (array) are required", path);
    for (auto it = m["vocab"].begin(); it != m["vocab"].end(); ++it)
      vocab_[it.key()] = token_id(*it, path, fmt::format("model.vocab[{}]", json_quote(it.key())));
    int rank = 0;
    for (const auto& e : m["merges"]) {
      std::string a, b;
      if (e.is_string()) {  // older format: "a b"
        const std::string s = e.get<std::string>();
        const size_t sp = s.find(' ');
        if (sp == std::string::npos) fail("{}: merge {} '{}' has no space", path, rank, clip(s));
        a = s.substr(0, sp), b = s.substr(sp + 1);
      } else if (e.is_array() && e.size() == 2 && e[0].is_string() && e[1].is_string()) {
        a = e[0].get<std::string>(), b = e[1].get<std::string>();
      } else {
        fail("{}: merge {} is neither \"a b\" nor [a, b]", path, rank);
      }
      ranks_.emplace(a + '\n' + b, rank++);
    }
    model_vocab_ = vocab_;
    read_model_flags(m, path);
    read_pre_tokenizer(j, path);
    // Normalizer: NFC (Qwen2), alone or in a Sequence; anything else is refused, not ignored.
    if (j.contains("normalizer") && !j["normalizer"].is_null()) {
      const auto& nz = j["normalizer"];
      const std::string type = nz.value("type", "");
      if (type == "NFC") {
        nfc_ = true;
      } else if (type == "Sequence" && nz.contains("normalizers") && nz["normalizers"].size() == 1 &&
                 nz["normalizers"][0].value("type", "") == "NFC") {
        nfc_ = true;
      } else {
        fail("{}: normalizer {} not supported (only NFC)", path, nz.is_object() ? io::json_brief(nz.value("type", nlohmann::json())) : io::json_brief(nz));
      }
    }
    if (j.contains("added_tokens") && !j["added_tokens"].is_null()) {
      if (!j["added_tokens"].is_array()) fail("{}: added_tokens must be an array", path);
      int k = 0;
      for (const auto& t : j["added_tokens"]) {
        if (!t.is_object() || !t.contains("content") || !t["content"].is_string() || !t.contains("id"))
          fail("{}: added_tokens[{}] must be an object with a string content and an integer id", path, k);
        added_.emplace_back(t["content"].get<std::string>(),
                            token_id(t["id"], path, fmt::format("added_tokens[{}].id", k)));
        vocab_[added_.back().first] = added_.back().second;
        ++k;
      }
    }
  }

  // The BPE model's flags: ignore_merges is implemented; the others must be off.
  void read_model_flags(const nlohmann::json& m, const std::string& path) {
    for (auto it = m.begin(); it != m.end(); ++it) {
      const std::string& k = it.key();
      const nlohmann::json& v = it.value();
      if (k == "type" || k == "vocab" || k == "merges") continue;
      if (k == "ignore_merges") {
        if (!v.is_boolean()) fail("{}: model.ignore_merges = {}: expected true or false", path, io::json_brief(v));
        ignore_merges_ = v.get<bool>();
        continue;
      }
      const bool off = v.is_null() || (v.is_boolean() && !v.get<bool>()) ||
                       ((k == "continuing_subword_prefix" || k == "end_of_word_suffix") && v == "");
      const bool known = k == "dropout" || k == "unk_token" || k == "fuse_unk" || k == "byte_fallback" ||
                         k == "continuing_subword_prefix" || k == "end_of_word_suffix";
      if (!known || !off) fail("{}: model.{} = {} not supported", path, k, io::json_brief(v));
    }
  }

  // The pre_tokenizer: Sequence [Split(Qwen2 or Llama 3 regex, Isolated), ByteLevel without its
  // own regex and prefix space]; anything else is refused by name. (Absent: the Qwen2 split.)
  void read_pre_tokenizer(const nlohmann::json& j, const std::string& path) {
    if (!j.contains("pre_tokenizer") || j["pre_tokenizer"].is_null()) return;
    const nlohmann::json& pt = j["pre_tokenizer"];
    auto refuse = [&](const std::string& what, const nlohmann::json& v) {
      fail("{}: pre_tokenizer{} = {} not supported (expected Sequence [Split with the Qwen2 or Llama 3 "
           "regex, Isolated; ByteLevel with add_prefix_space and use_regex false])",
           path, what, io::json_brief(v));
    };
    if (!pt.is_object() || pt.value("type", nlohmann::json()) != "Sequence") refuse(".type", pt.is_object() ? pt.value("type", nlohmann::json()) : pt);
    if (!pt.contains("pretokenizers") || !pt["pretokenizers"].is_array() || pt["pretokenizers"].size() != 2)
      refuse(".pretokenizers", pt.value("pretokenizers", nlohmann::json()));
    const nlohmann::json& sp = pt["pretokenizers"][0];
    const nlohmann::json& bl = pt["pretokenizers"][1];
    if (!sp.is_object() || sp.value("type", nlohmann::json()) != "Split") refuse(".pretokenizers[0]", sp);
    for (auto it = sp.begin(); it != sp.end(); ++it) {
      const std::string& k = it.key();
      if (k == "type") continue;
      if (k == "behavior" && it.value() == "Isolated") continue;
      if (k == "invert" && it.value() == false) continue;
      if (k == "pattern" && it.value().is_object() && it.value().size() == 1 && it.value().contains("Regex") &&
          it.value()["Regex"].is_string()) {
        const std::string re = it.value()["Regex"].get<std::string>();
        if (re == kQwen2Split) { max_digits_ = 1; continue; }
        if (re == kLlama3Split) { max_digits_ = 3; continue; }
      }
      refuse(".pretokenizers[0]." + k, it.value());
    }
    if (!sp.contains("pattern")) refuse(".pretokenizers[0].pattern", nlohmann::json());
    if (!bl.is_object() || bl.value("type", nlohmann::json()) != "ByteLevel") refuse(".pretokenizers[1]", bl);
    for (auto it = bl.begin(); it != bl.end(); ++it) {
      const std::string& k = it.key();
      if (k == "type" || (k == "trim_offsets" && it.value().is_boolean())) continue;  // offsets only
      if ((k == "add_prefix_space" || k == "use_regex") && it.value() == false) continue;
      refuse(".pretokenizers[1]." + k, it.value());
    }
  }

  static std::string utf8(char32_t c) {
    std::string s;
    if (c < 0x80) s += char(c);
    else if (c < 0x800) s += char(0xC0 | (c >> 6)), s += char(0x80 | (c & 0x3f));
    else s += char(0xE0 | (c >> 12)), s += char(0x80 | ((c >> 6) & 0x3f)), s += char(0x80 | (c & 0x3f));
    return s;
  }

  // The added tokens as a byte trie: edges (node << 8 | byte) -> child, and the added_ index
  // that ends at a node (the first of equal strings, as the longest-first scan found it).
  void build_added_trie() {
    trie_end_.assign(1, -1);
    size_t bytes = 0;
    for (const auto& a : added_) bytes += a.first.size();
    trie_.reserve(bytes);
    trie_end_.reserve(bytes + 1);
    for (size_t k = 0; k < added_.size(); ++k) {
      const std::string& s = added_[k].first;
      added_by_id_.try_emplace(added_[k].second, k);
      if (s.empty()) continue;
      uint64_t node = 0;
      for (unsigned char c : s) {
        auto [it, fresh] = trie_.try_emplace(node << 8 | c, trie_end_.size());
        if (fresh) trie_end_.push_back(-1);
        node = it->second;
      }
      if (trie_end_[node] < 0) trie_end_[node] = static_cast<int64_t>(k);
    }
  }

  // The longest added token that starts at text[i], or nullptr: one trie walk, at most as many
  // steps as the longest added token has bytes (never a comparison with every added token).
  const std::pair<std::string, int>* added_at(std::string_view text, size_t i) const {
    if (trie_.empty()) return nullptr;
    uint64_t node = 0;
    int64_t best = -1;
    for (size_t j = i; j < text.size(); ++j) {
      const auto it = trie_.find(node << 8 | static_cast<unsigned char>(text[j]));
      if (it == trie_.end()) break;
      node = it->second;
      if (trie_end_[node] >= 0) best = trie_end_[node];
    }
    return best < 0 ? nullptr : &added_[static_cast<size_t>(best)];
  }

  void encode_plain(std::string_view raw, std::vector<int>& ids) const {
    const std::string normalized = nfc_ ? nfc(raw) : std::string(raw);
    const std::string_view text = normalized;
    const std::vector<unit> u = decode_utf8(text);
    for (size_t i = 0; i < u.size();) {
      const size_t e = match_at(u, i, max_digits_);
      bpe(text.substr(u[i].begin, u[e - 1].end - u[i].begin), ids);
      i = e;
    }
  }

  // Byte-level BPE of one pre-token: repeatedly merge the adjacent pair of lowest rank
  // (leftmost among equal ranks), then look the symbols up.
  void bpe(std::string_view piece, std::vector<int>& ids) const {
    {
      std::lock_guard<std::mutex> lock(cache_mutex_);
      auto it = cache_.find(std::string(piece));
      if (it != cache_.end()) {
        ids.insert(ids.end(), it->second.begin(), it->second.end());
        return;
      }
    }
    if (ignore_merges_) {  // tokenizers' BPE: a whole word found in the vocabulary is not merged
      std::string word;
      for (unsigned char b : piece) word += byte_char_[b];
      auto it = model_vocab_.find(word);
      if (it != model_vocab_.end()) {
        ids.push_back(it->second);
        return;
      }
    }
    // Symbols in a linked list; candidate pairs in a heap ordered by (rank, left position), so
    // each merge costs O(log n) and a pre-token of n bytes O(n log n) (the same merges as
    // rescanning for the lowest-ranked leftmost pair every time, which is O(n^2)).
    const int n = static_cast<int>(piece.size());
    std::vector<std::string> sym(n);
    for (int k = 0; k < n; ++k) sym[k] = byte_char_[static_cast<unsigned char>(piece[k])];
    std::vector<int> next(n), prev(n);
    std::vector<uint32_t> version(n, 0);
    for (int k = 0; k < n; ++k) next[k] = k + 1 < n ? k + 1 : -1, prev[k] = k - 1;
    struct cand {
      int rank, left, right;
      uint32_t lv, rv;
      bool operator<(const cand& o) const {  // std::priority_queue pops the largest
        return rank != o.rank ? rank > o.rank : left > o.left;
      }
    };
    std::priority_queue<cand> heap;
    auto push = [&](int l) {
      if (l < 0 || next[l] < 0) return;
      const int r = next[l];
      auto it = ranks_.find(sym[l] + '\n' + sym[r]);
      if (it != ranks_.end()) heap.push({it->second, l, r, version[l], version[r]});
    };
    for (int k = 0; k + 1 < n; ++k) push(k);
    while (!heap.empty()) {
      const cand c = heap.top();
      heap.pop();
      if (version[c.left] != c.lv || version[c.right] != c.rv || next[c.left] != c.right) continue;  // stale
      sym[c.left] += sym[c.right];
      sym[c.right].clear();
      ++version[c.left];
      ++version[c.right];
      next[c.left] = next[c.right];
      if (next[c.left] >= 0) prev[next[c.left]] = c.left;
      push(prev[c.left]);
      push(c.left);
    }
    std::vector<std::string> merged;
    for (int k = n > 0 ? 0 : -1; k >= 0; k = next[k]) merged.push_back(std::move(sym[k]));
    sym = std::move(merged);
    std::vector<int> out;
    for (const auto& s : sym) {
      auto it = vocab_.find(s);
      if (it == vocab_.end()) fail("tokenizer {}: merged symbol '{}' is not in model.vocab", source_, clip(s));
      out.push_back(it->second);
    }
    ids.insert(ids.end(), out.begin(), out.end());
    std::lock_guard<std::mutex> lock(cache_mutex_);
    // Short pieces only: words repeat, a megabyte-long pre-token does not (and would bloat the cache).
    if (cache_.size() < (1u << 20) && piece.size() <= 64) cache_.emplace(std::string(piece), std::move(out));
  }

  bool nfc_ = false;
  int max_digits_ = 1;          // the split regex's digit run (see kQwen2Split, kLlama3Split)
  bool ignore_merges_ = false;  // model.ignore_merges: a piece in the vocabulary is one token
  std::unordered_map<std::string, int> vocab_;
  std::unordered_map<std::string, int> model_vocab_;  // model.vocab only (not added tokens)
  std::unordered_map<std::string, int> ranks_;
  std::vector<std::pair<std::string, int>> added_;
  std::unordered_map<uint64_t, uint64_t> trie_;   // added tokens: (node << 8 | byte) -> node
  std::vector<int64_t> trie_end_;                 // node -> index into added_, or -1
  std::unordered_map<int, size_t> added_by_id_;   // id -> index into added_
  std::vector<std::string> pieces_;
  std::string byte_char_[256];
  std::unordered_map<std::string, char> char_byte_;
  mutable std::mutex cache_mutex_;
  mutable std::unordered_map<std::string, std::vector<int>> cache_;
};

}  // namespace

std::unique_ptr<tokenizer> load_hf_tokenizer(const std::string& path) {
  return std::make_unique<bpe_tokenizer>(path);
}

std::unique_ptr<tokenizer> make_bpe_tokenizer(const bpe_vocab& v, const std::string& what,
                                              const std::string& source) {
  // The tokenizer.json that Hugging Face ships for each pre-tokenizer llama.cpp names.
  nlohmann::json j, vocab = nlohmann::json::object(), added = nlohmann::json::array();
  for (const auto& [piece, id] : v.tokens) vocab[piece] = id;
  for (const auto& [piece, id] : v.added) added.push_back({{"content", piece}, {"id", id}});
  const char* regex = nullptr;
  if (v.pre == "qwen2") {
    regex = kQwen2Split;
    j["normalizer"] = {{"type", "NFC"}};
  } else if (v.pre == "llama-bpe") {
    regex = kLlama3Split;
  } else {
    fail("{}: tokenizer.ggml.pre '{}' not supported (expected qwen2 or llama-bpe)", what, v.pre);
  }
  j["model"] = {{"type", "BPE"}, {"vocab", std::move(vocab)}, {"merges", v.merges},
                {"ignore_merges", v.pre == "llama-bpe"}};
  j["added_tokens"] = std::move(added);
  j["pre_tokenizer"] = {{"type", "Sequence"},
                        {"pretokenizers",
                         {{{"type", "Split"}, {"pattern", {{"Regex", regex}}}, {"behavior", "Isolated"}},
                          {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}}}};
  return std::make_unique<bpe_tokenizer>(j, what, source);
}

}  // namespace attnum::model
