// Hugging Face tokenizer.json BPE: byte-level (GPT-2 / Qwen2 / Llama 3) and SentencePiece
// conversions (Llama 2, Mistral, TinyLlama). Added tokens split out first; then the normalizer
// (NFC, NFKC, Prepend, Replace, or a Sequence of them) on each piece between added tokens; then the
// pre-tokenizer's splits (Split with its own regex, behaviour and invert; Digits), each applied to
// every piece of the one before as the tokenizers library applies them, and last either ByteLevel
// (GPT-2's regex when use_regex; each piece's UTF-8 bytes mapped to GPT-2's printable byte
// alphabet) or Metaspace (spaces replaced by its replacement character, which it prepends by its
// prepend_scheme and splits before when split); then each piece's code points merged by rank (or,
// with ignore_merges, taken whole when the vocabulary has it), a code point outside the vocabulary
// becoming its <0xXX> byte tokens (byte_fallback) or the unknown token (fused when fuse_unk). The
// regexes run on attnum/model/regex.h (Oniguruma's match semantics, as the tokenizers library uses).
// "file@3ba8ad0 line N" below: huggingface/tokenizers@3ba8ad0061a885baf052bbb7bbd22857e73e0c4e,
// tokenizers/src/<file> (pre_tokenizers/whitespace.rs, models/bpe/model.rs,
// tokenizer/added_vocabulary.rs).
#include <algorithm>
#include <cctype>
#include <filesystem>
#include <memory>
#include <mutex>
#include <queue>
#include <nlohmann/json.hpp>
#include <unordered_map>
#include <utility>

#include "attnum/core/error.h"
#include "attnum/core/file.h"
#include "attnum/io/json_file.h"
#include "attnum/model/nfc.h"
#include "attnum/model/regex.h"
#include "attnum/model/tokenizer.h"
#include "attnum/model/utf8.h"
#include "attnum/model/weights.h"

namespace attnum::model {
namespace {
// A pre-tokenizer step applied to every piece (tokenizers' SplitDelimiterBehavior for Split).
enum class split_behavior { removed, isolated, merged_with_previous, merged_with_next, contiguous };
struct pre_step {
  std::shared_ptr<const regex> re;  // null: a Digits step (\p{N} code points, Rust's char::is_numeric)
  split_behavior behavior = split_behavior::isolated;
  bool invert = false;
  // Whitespace: runs of word characters and runs of other non-space characters, the spaces
  // dropped; WhitespaceSplit: runs of non-space characters.
  enum kind_t { split, whitespace, whitespace_split } kind = split;
};

// Whitespace and WhitespaceSplit (tokenizers' pre_tokenizers/whitespace.rs@3ba8ad0: line 22, the
// regex \w+|[^\w\s]+ of the Rust regex crate, split with Invert and Removed, so its matches are
// the pieces; line 38, a split on char::is_whitespace, Removed). Rust's char::is_whitespace and
// the regex crate's \s are Unicode's White_Space property; its \w is Alphabetic, Mark,
// Decimal_Number, Connector_Punctuation and Join_Control (regex crate, UNICODE.md, "Perl character
// classes"). Alphabetic is the letters, Nl and Other_Alphabetic, whose code points are marks but
// for the circled, squared and negative circled/squared Latin letters (So). General categories
// come from unicode_category (Unicode 14): a code point assigned later is not a word character here.
bool is_white_space(char32_t c) {
  return (c >= 0x9 && c <= 0xD) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) ||
         c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}
bool is_word_char(char32_t c) {
  const int k = unicode_category(c);
  if (k <= 9 || k == 11) return true;  // Lu Ll Lt Lm Lo Mn Mc Me Nd Nl, Pc
  return c == 0x200C || c == 0x200D || (c >= 0x24B6 && c <= 0x24E9) || (c >= 0x1F130 && c <= 0x1F149) ||
         (c >= 0x1F150 && c <= 0x1F169) || (c >= 0x1F170 && c <= 0x1F189);
}
// A normalizer step: NFC, NFKC, Prepend (text before a non-empty piece) or Replace (every match
// of re, a scan left to right, by text).
struct norm_step {
  enum kind_t { nfc, nfkc, prepend, replace } kind = nfc;
  std::string text;
  std::shared_ptr<const regex> re;
};
// An added token: its content, id, whether it is matched on the normalized text, and the text
// it is matched as (the content, or the normalizer's output of it when normalized).
struct added_token {
  std::string content;
  int id = 0;
  bool normalized = false;
  std::string match;
};
// Metaspace's prepend_scheme.
enum class prepend_scheme { always, first, never };

// GPT-2's split, which ByteLevel applies when use_regex is true.
constexpr const char* kGpt2Split = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

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
    init(j, path,
         fmt::format("{}:{}", std::filesystem::path(path).filename().string(), fnv1a_hex(text.data(), text.size())));
  }
  // The tokenizer of a tokenizer.json document built elsewhere (make_bpe_tokenizer).
  bpe_tokenizer(const nlohmann::json& j, const std::string& what, const std::string& source) { init(j, what, source); }

 private:
  void init(const nlohmann::json& j, const std::string& path, const std::string& source) {
    try {
      load(j, path);
    } catch (const nlohmann::json::exception& e) {  // a field of the wrong type
      fail("{}: unexpected JSON content: {}", path, clip(e.what()));
    }
    // Longest added token first, so a prefix never shadows a longer one.
    std::sort(added_.begin(), added_.end(), [](auto& x, auto& y) { return x.content.size() > y.content.size(); });
    // A normalized token is matched by its content as the normalizer writes it (tokenizers'
    // tokenizer/added_vocabulary.rs@3ba8ad0 add_tokens, lines 316-323: normalized with the
    // tokenizer's normalizer; refresh_added_tokens, lines 386-398: the cached form, else the content).
    {
      scratch s;
      for (added_token& a : added_) a.match = a.normalized ? normalize(a.content, s) : a.content;
    }
    build_added_tries();
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
  // Added tokens as the tokenizers library extracts them (tokenizer/added_vocabulary.rs@3ba8ad0,
  // extract_and_normalize, lines 523-566): those with normalized false split out of the raw text;
  // each piece between them normalized; those with normalized true split out of that.
  std::vector<int> encode(std::string_view text) const override {
    std::vector<int> ids;
    scratch s;
    split_at_added(raw_trie_, text, ids,
                   [&](size_t b, size_t e) { encode_plain(text.substr(b, e - b), b == 0, ids, s); });
    return ids;
  }

  std::string decode(int, int id) const override {
    if (id < 0 || id >= size()) fail("token id {} outside the vocabulary (0..{})", id, size() - 1);
    if (auto it = added_by_id_.find(id); it != added_by_id_.end()) return added_[it->second].content;
    std::string out;
    const std::string& p = pieces_[id];
    if (!byte_level_) {  // the piece's text, a byte token as its byte, the metaspace character as a space
      if (byte_fallback_ && p.size() == 6 && p.starts_with("<0x") && p[5] == '>' &&
          std::isxdigit(static_cast<unsigned char>(p[3])) && std::isxdigit(static_cast<unsigned char>(p[4])))
        return std::string(1, char(std::stoi(p.substr(3, 2), nullptr, 16)));
      const std::string& space = metaspace_ ? meta_rep_ : space_piece_;
      for (size_t i = 0; i < p.size();) {
        if (!space.empty() && p.compare(i, space.size(), space) == 0) {
          out += ' ';
          i += space.size();
        } else {
          out += p[i++];
        }
      }
      return out;
    }
    for (size_t i = 0; i < p.size();) {
      const int len = decode_utf8_at(p, i).len;
      auto it = char_byte_.find(p.substr(i, size_t(len)));
      if (it != char_byte_.end()) out += it->second;
      i += size_t(len);
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
    read_normalizer(j, path);
    read_pre_tokenizer(j, path);
    if (j.contains("added_tokens") && !j["added_tokens"].is_null()) {
      if (!j["added_tokens"].is_array()) fail("{}: added_tokens must be an array", path);
      int k = 0;
      for (const auto& t : j["added_tokens"]) {
        if (!t.is_object() || !t.contains("content") || !t["content"].is_string() || !t.contains("id"))
          fail("{}: added_tokens[{}] must be an object with a string content and an integer id", path, k);
        added_token a;
        a.content = t["content"].get<std::string>();
        a.id = token_id(t["id"], path, fmt::format("added_tokens[{}].id", k));
        // normalized: matched on the normalized text (absent: false, matched on the raw text).
        if (t.contains("normalized")) {
          if (!t["normalized"].is_boolean())
            fail("{}: added_tokens[{}].normalized = {}: expected true or false", path, k,
                 io::json_brief(t["normalized"]));
          a.normalized = t["normalized"].get<bool>();
        }
        // single_word, lstrip and rstrip change what a match consumes (added_vocabulary.rs@3ba8ad0
        // find_matches): not implemented, so a token that sets one is refused; false (every shipped
        // Qwen2, Qwen3, Llama 2 and Llama 3 file) and absent are what the matching above does.
        for (const char* flag : {"single_word", "lstrip", "rstrip"}) {
          if (!t.contains(flag) || t[flag].is_null()) continue;
          if (!t[flag].is_boolean())
            fail("{}: added_tokens[{}].{} = {}: expected true or false", path, k, flag, io::json_brief(t[flag]));
          if (t[flag].get<bool>())
            fail("{}: added_tokens[{}].{} = true is not supported (added tokens are matched as written)", path, k,
                 flag);
        }
        added_.push_back(std::move(a));
        vocab_[added_.back().content] = added_.back().id;
        ++k;
      }
    }
  }

  // The BPE model's flags (tokenizers' models/bpe/model.rs): ignore_merges, byte_fallback,
  // fuse_unk, unk_token, continuing_subword_prefix and end_of_word_suffix are implemented (a
  // string, or null for none; "" adds nothing); dropout must be off.
  void read_model_flags(const nlohmann::json& m, const std::string& path) {
    for (auto it = m.begin(); it != m.end(); ++it) {
      const std::string& k = it.key();
      const nlohmann::json& v = it.value();
      if (k == "type" || k == "vocab" || k == "merges") continue;
      if (k == "ignore_merges" || k == "byte_fallback" || k == "fuse_unk") {
        if (!v.is_boolean()) fail("{}: model.{} = {}: expected true or false", path, k, io::json_brief(v));
        (k == "ignore_merges" ? ignore_merges_ : k == "byte_fallback" ? byte_fallback_ : fuse_unk_) = v.get<bool>();
        continue;
      }
      if (k == "unk_token") {
        if (v.is_null()) continue;
        if (!v.is_string()) fail("{}: model.unk_token = {}: expected a string or null", path, io::json_brief(v));
        auto id = model_vocab_.find(v.get<std::string>());
        if (id == model_vocab_.end()) fail("{}: model.unk_token = {}: not in model.vocab", path, io::json_brief(v));
        unk_id_ = id->second;
        unk_piece_ = v.get<std::string>();
        continue;
      }
      if (k == "continuing_subword_prefix" || k == "end_of_word_suffix") {
        if (v.is_null()) continue;
        if (!v.is_string()) fail("{}: model.{} = {}: expected a string or null", path, k, io::json_brief(v));
        (k == "continuing_subword_prefix" ? subword_prefix_ : word_suffix_) = v.get<std::string>();
        continue;
      }
      if (k != "dropout" || !v.is_null()) fail("{}: model.{} = {} not supported", path, k, io::json_brief(v));
    }
  }

  // The normalizer: NFC, NFKC, Prepend, Replace, or a Sequence of them, applied in order; anything
  // else is refused by name, not ignored.
  void read_normalizer(const nlohmann::json& j, const std::string& path) {
    if (!j.contains("normalizer") || j["normalizer"].is_null()) return;
    const nlohmann::json& nz = j["normalizer"];
    auto refuse = [&](const std::string& field, const nlohmann::json& v, const std::string& why) {
      fail("{}: normalizer{} = {} not supported ({})", path, field, io::json_brief(v), why);
    };
    auto type_of = [](const nlohmann::json& v) { return v.is_object() ? v.value("type", nlohmann::json()) : v; };
    std::vector<std::pair<const nlohmann::json*, std::string>> items;
    if (type_of(nz) == "Sequence") {
      if (!nz.contains("normalizers") || !nz["normalizers"].is_array())
        refuse(".normalizers", nz.value("normalizers", nlohmann::json()), "expected an array");
      for (size_t k = 0; k < nz["normalizers"].size(); ++k)
        items.emplace_back(&nz["normalizers"][k], fmt::format(".normalizers[{}]", k));
    } else {
      items.emplace_back(&nz, "");
    }
    for (const auto& item : items) {
      const nlohmann::json* st = item.first;
      const std::string& field = item.second;
      const nlohmann::json type = type_of(*st);
      norm_step step;
      auto fields = [&](std::initializer_list<const char*> allowed) {
        for (auto it = st->begin(); it != st->end(); ++it)
          if (std::find_if(allowed.begin(), allowed.end(), [&](const char* a) { return it.key() == a; }) ==
              allowed.end())
            refuse(field + "." + it.key(), it.value(), "unknown field");
      };
      if (type == "NFC" || type == "NFKC") {
        fields({"type"});
        step.kind = type == "NFC" ? norm_step::nfc : norm_step::nfkc;
      } else if (type == "Prepend") {
        fields({"type", "prepend"});
        if (!st->contains("prepend") || !(*st)["prepend"].is_string())
          refuse(field + ".prepend", st->value("prepend", nlohmann::json()), "expected a string");
        step.kind = norm_step::prepend;
        step.text = (*st)["prepend"].get<std::string>();
      } else if (type == "Replace") {
        fields({"type", "pattern", "content"});
        if (!st->contains("content") || !(*st)["content"].is_string())
          refuse(field + ".content", st->value("content", nlohmann::json()), "expected a string");
        step.kind = norm_step::replace;
        step.text = (*st)["content"].get<std::string>();
        step.re = read_pattern(st->value("pattern", nlohmann::json()), path, "normalizer" + field + ".pattern");
        if (st->value("pattern", nlohmann::json()) == nlohmann::json{{"String", " "}}) space_piece_ = step.text;
      } else {
        refuse(field + ".type", type, "expected NFC, NFKC, Prepend, Replace, or a Sequence of them");
      }
      normalizers_.push_back(std::move(step));
    }
  }

  // A pattern field, {"Regex": pattern} or {"String": text}, compiled; `field` is its full name.
  static std::shared_ptr<const regex> read_pattern(const nlohmann::json& v, const std::string& path,
                                                   const std::string& field) {
    if (!v.is_object() || v.size() != 1 || !(v.contains("Regex") || v.contains("String")))
      fail("{}: {} = {} not supported (expected {{\"Regex\": pattern}} or {{\"String\": text}})", path, field,
           io::json_brief(v));
    const std::string kind = v.begin().key();
    const nlohmann::json& pat = v.begin().value();
    if (!pat.is_string())
      fail("{}: {}.{} = {} not supported (expected a string)", path, field, kind, io::json_brief(pat));
    std::string re = pat.get<std::string>();
    if (kind == "String") re = regex_quote(re);
    std::shared_ptr<const regex> out;
    try {
      out = std::make_shared<regex>(re);
    } catch (const error& e) {
      fail("{}: {}.{}: {}", path, field, kind, e.what());
    }
    if (out->can_match_empty())
      fail("{}: {}.{} = {} not supported (a pattern that can match the empty string)", path, field, kind,
           io::json_brief(pat));
    return out;
  }

  // The pre_tokenizer: ByteLevel or Metaspace, alone or ending a Sequence of Split and Digits
  // steps; anything else is refused by name. Absent: with a Prepend or Replace normalizer (a
  // SentencePiece conversion) no pre-tokenization, as the tokenizers library does; otherwise the
  // Qwen2 split and the byte-level alphabet.
  void read_pre_tokenizer(const nlohmann::json& j, const std::string& path) {
    if (!j.contains("pre_tokenizer") || j["pre_tokenizer"].is_null()) {
      const bool spm = std::any_of(normalizers_.begin(), normalizers_.end(), [](const norm_step& n) {
        return n.kind == norm_step::prepend || n.kind == norm_step::replace;
      });
      if (!spm) steps_.push_back({std::make_shared<regex>(kQwen2Split)});
      byte_level_ = !spm;
      return;
    }
    const nlohmann::json& pt = j["pre_tokenizer"];
    auto refuse = [&](const std::string& field, const nlohmann::json& v, const std::string& why) {
      fail("{}: pre_tokenizer{} = {} not supported ({})", path, field, io::json_brief(v), why);
    };
    auto type_of = [](const nlohmann::json& v) { return v.is_object() ? v.value("type", nlohmann::json()) : v; };
    std::vector<std::pair<const nlohmann::json*, std::string>> items;  // each step, its field path
    if (type_of(pt) == "Sequence") {
      if (!pt.contains("pretokenizers") || !pt["pretokenizers"].is_array() || pt["pretokenizers"].empty())
        refuse(".pretokenizers", pt.value("pretokenizers", nlohmann::json()), "expected a non-empty array");
      for (size_t k = 0; k < pt["pretokenizers"].size(); ++k)
        items.emplace_back(&pt["pretokenizers"][k], fmt::format(".pretokenizers[{}]", k));
      for (auto it = pt.begin(); it != pt.end(); ++it)
        if (it.key() != "type" && it.key() != "pretokenizers") refuse("." + it.key(), it.value(), "unknown field");
    } else {
      items.emplace_back(&pt, "");
    }
    const std::string expected =
        "expected ByteLevel or Metaspace, alone or ending a Sequence of Split, Digits, Whitespace and WhitespaceSplit; "
        "or Whitespace or WhitespaceSplit, alone or anywhere in such a Sequence";
    for (size_t k = 0; k < items.size(); ++k) {
      const nlohmann::json& st = *items[k].first;
      const std::string& field = items[k].second;
      const nlohmann::json type = type_of(st);
      const bool last = k + 1 == items.size();
      if (type == "ByteLevel" && last)
        read_byte_level(st, path, field);
      else if (type == "Metaspace" && last)
        read_metaspace(st, path, field);
      else if (type == "Split" && !last)
        read_split(st, path, field);
      else if (type == "Digits" && !last)
        read_digits(st, path, field);
      else if (type == "Whitespace" || type == "WhitespaceSplit")
        read_whitespace(st, path, field);
      else
        refuse(field + ".type", type, expected);
    }
  }

  static void refuse_field(const std::string& path, const std::string& field, const nlohmann::json& v,
                           const std::string& why) {
    fail("{}: pre_tokenizer{} = {} not supported ({})", path, field, io::json_brief(v), why);
  }

  void read_split(const nlohmann::json& sp, const std::string& path, const std::string& field) {
    pre_step step;
    bool have_pattern = false;
    for (auto it = sp.begin(); it != sp.end(); ++it) {
      const std::string& k = it.key();
      const nlohmann::json& v = it.value();
      const std::string f = field + "." + k;
      if (k == "type") continue;
      if (k == "behavior") {
        static const std::pair<const char*, split_behavior> kinds[] = {
            {"Removed", split_behavior::removed},
            {"Isolated", split_behavior::isolated},
            {"MergedWithPrevious", split_behavior::merged_with_previous},
            {"MergedWithNext", split_behavior::merged_with_next},
            {"Contiguous", split_behavior::contiguous}};
        bool found = false;
        for (const auto& [name, b] : kinds)
          if (v == name) step.behavior = b, found = true;
        if (!found)
          refuse_field(path, f, v, "expected Removed, Isolated, MergedWithPrevious, MergedWithNext or Contiguous");
      } else if (k == "invert") {
        if (!v.is_boolean()) refuse_field(path, f, v, "expected true or false");
        step.invert = v.get<bool>();
      } else if (k == "pattern") {
        step.re = read_pattern(v, path, "pre_tokenizer" + f);
        have_pattern = true;
      } else {
        refuse_field(path, f, v, "unknown field");
      }
    }
    if (!have_pattern) refuse_field(path, field + ".pattern", nlohmann::json(), "expected a pattern");
    if (!sp.contains("behavior"))
      refuse_field(path, field + ".behavior", nlohmann::json(), "required, as the tokenizers library requires it");
    steps_.push_back(std::move(step));
  }

  void read_whitespace(const nlohmann::json& w, const std::string& path, const std::string& field) {
    for (auto it = w.begin(); it != w.end(); ++it)
      if (it.key() != "type") refuse_field(path, field + "." + it.key(), it.value(), "unknown field");
    pre_step step;
    step.kind = w["type"] == "Whitespace" ? pre_step::whitespace : pre_step::whitespace_split;
    steps_.push_back(std::move(step));
  }

  void read_digits(const nlohmann::json& d, const std::string& path, const std::string& field) {
    pre_step step;
    for (auto it = d.begin(); it != d.end(); ++it) {
      if (it.key() == "type") continue;
      if (it.key() != "individual_digits" || !it.value().is_boolean())
        refuse_field(path, field + "." + it.key(), it.value(), "expected individual_digits true or false");
      step.behavior = it.value().get<bool>() ? split_behavior::isolated : split_behavior::contiguous;
    }
    if (!d.contains("individual_digits")) step.behavior = split_behavior::contiguous;  // its default
    steps_.push_back(std::move(step));
  }

  void read_byte_level(const nlohmann::json& bl, const std::string& path, const std::string& field) {
    bool use_regex = true;  // the tokenizers library's default
    for (auto it = bl.begin(); it != bl.end(); ++it) {
      const std::string& k = it.key();
      const nlohmann::json& v = it.value();
      if (k == "type" || (k == "trim_offsets" && v.is_boolean())) continue;  // offsets only
      if (k == "add_prefix_space" && v == false) continue;
      if (k == "use_regex" && v.is_boolean()) {
        use_regex = v.get<bool>();
        continue;
      }
      refuse_field(path, field + "." + k, v, k == "add_prefix_space" ? "only false" : "unknown field");
    }
    if (!bl.contains("add_prefix_space"))
      refuse_field(path, field + ".add_prefix_space", nlohmann::json(), "expected false (its default is true)");
    if (use_regex) steps_.push_back({std::make_shared<regex>(kGpt2Split)});
    byte_level_ = true;
  }

  // Metaspace (tokenizers' pre_tokenizers/metaspace.rs): replacement (one character),
  // prepend_scheme (always, its default; first; never), split (default true); the legacy
  // add_prefix_space false is accepted only with prepend_scheme never, as the library's
  // deserializer requires; str_rep is ignored as there.
  void read_metaspace(const nlohmann::json& ms, const std::string& path, const std::string& field) {
    metaspace_ = true;
    bool have_replacement = false;
    for (auto it = ms.begin(); it != ms.end(); ++it) {
      const std::string& k = it.key();
      const nlohmann::json& v = it.value();
      const std::string f = field + "." + k;
      if (k == "type") continue;
      if (k == "replacement") {
        if (!v.is_string() || v.get<std::string>().empty() ||
            decode_utf8_at(v.get_ref<const std::string&>(), 0).len != int(v.get_ref<const std::string&>().size()) ||
            !decode_utf8_at(v.get_ref<const std::string&>(), 0).ok)
          refuse_field(path, f, v, "expected one character");
        meta_rep_ = v.get<std::string>();
        have_replacement = true;
      } else if (k == "prepend_scheme") {
        if (v == "always")
          meta_scheme_ = prepend_scheme::always;
        else if (v == "first")
          meta_scheme_ = prepend_scheme::first;
        else if (v == "never")
          meta_scheme_ = prepend_scheme::never;
        else
          refuse_field(path, f, v, "expected always, first or never");
      } else if (k == "split" || k == "add_prefix_space") {
        if (!v.is_boolean()) refuse_field(path, f, v, "expected true or false");
        if (k == "split") meta_split_ = v.get<bool>();
      } else if (k == "str_rep") {
        if (!v.is_string()) refuse_field(path, f, v, "expected a string");
      } else {
        refuse_field(path, f, v, "unknown field");
      }
    }
    if (!have_replacement) refuse_field(path, field + ".replacement", nlohmann::json(), "expected one character");
    if (ms.contains("add_prefix_space") && ms["add_prefix_space"] == false && meta_scheme_ != prepend_scheme::never)
      refuse_field(path, field + ".add_prefix_space", false, "false needs prepend_scheme never");
    meta_re_ = std::make_shared<regex>(regex_quote(meta_rep_));
  }

  // A literal string as a pattern (Split's {"String": ...}).
  static std::string regex_quote(const std::string& s) {
    std::string out;
    for (char c : s) {
      if (std::string_view("\\.^$|?*+()[]{}-&~#").find(c) != std::string_view::npos) out += '\\';
      out += c;
    }
    return out;
  }

  static std::string utf8(char32_t c) {
    std::string s;
    append_utf8(s, c);
    return s;
  }

  // The added tokens as two byte tries, one of the raw contents and one of the normalized
  // tokens' normalized forms: edges (node << 8 | byte) -> child, and the added_ index that ends at a
  // node (the first of equal strings, as the longest-first sort left them).
  struct added_trie {
    std::unordered_map<uint64_t, uint64_t> edges;
    std::vector<int64_t> end = {-1};
  };
  void build_added_tries() {
    for (size_t k = 0; k < added_.size(); ++k) {
      const std::string& s = added_[k].match;
      added_by_id_.try_emplace(added_[k].id, k);
      if (s.empty()) continue;
      added_trie& t = added_[k].normalized ? norm_trie_ : raw_trie_;
      uint64_t node = 0;
      for (unsigned char c : s) {
        auto [it, fresh] = t.edges.try_emplace(node << 8 | c, t.end.size());
        if (fresh) t.end.push_back(-1);
        node = it->second;
      }
      if (t.end[node] < 0) t.end[node] = static_cast<int64_t>(k);
    }
  }

  // The added token of trie `t` that is longest among those starting at text[i], or nullptr: one
  // trie walk, at most as many steps as the longest added token has bytes. A scan that tries each
  // i in turn so finds the leftmost-longest matches of the tokenizers library's Aho-Corasick
  // automaton (added_vocabulary.rs@3ba8ad0 lines 401-418, MatchKind::LeftmostLongest).
  const added_token* added_at(const added_trie& t, std::string_view text, size_t i) const {
    if (t.edges.empty()) return nullptr;
    uint64_t node = 0;
    int64_t best = -1;
    for (size_t j = i; j < text.size(); ++j) {
      const auto it = t.edges.find(node << 8 | static_cast<unsigned char>(text[j]));
      if (it == t.edges.end()) break;
      node = it->second;
      if (t.end[node] >= 0) best = t.end[node];
    }
    return best < 0 ? nullptr : &added_[static_cast<size_t>(best)];
  }

  struct scratch {
    std::vector<char32_t> cps;
    std::vector<size_t> at;  // byte offset of each code point, and the end
    std::vector<regex::match> matches;
    std::vector<std::pair<std::pair<size_t, size_t>, bool>> parts;  // byte range, is a match
    std::vector<std::pair<std::pair<size_t, size_t>, bool>> kept;   // byte range, removed
  };

  // The normalizer's steps on one piece of text between added tokens (tokenizers'
  // normalizers/prepend.rs: Prepend adds its text to a non-empty piece only; replace.rs: every
  // match of a left-to-right scan replaced).
  std::string normalize(std::string_view raw, scratch& s) const {
    std::string t(raw);
    for (const norm_step& n : normalizers_) {
      if (n.kind == norm_step::nfc) {
        t = nfc(t);
      } else if (n.kind == norm_step::nfkc) {
        t = nfkc(t);
      } else if (n.kind == norm_step::prepend) {
        if (!t.empty()) t.insert(0, n.text);
      } else {
        code_points(t, 0, t.size(), s);
        s.matches.clear();
        n.re->find_all(s.cps, s.matches);
        if (s.matches.empty()) continue;
        std::string out;
        size_t prev = 0;
        for (const regex::match& m : s.matches) {
          out.append(t, s.at[prev], s.at[m.begin] - s.at[prev]);
          out += n.text;
          prev = m.end;
        }
        out.append(t, s.at[prev], std::string::npos);
        t = std::move(out);
      }
    }
    return t;
  }

  // Splits text at the added tokens of trie t, leftmost-longest (added_at): the text between them
  // goes to between(begin, end) (also when empty), each token's id to ids, in text order.
  template <typename F>
  void split_at_added(const added_trie& t, std::string_view text, std::vector<int>& ids, F&& between) const {
    size_t start = 0;
    for (size_t i = 0; i < text.size();) {
      const added_token* hit = added_at(t, text, i);
      if (!hit) {
        ++i;
        continue;
      }
      between(start, i);
      ids.push_back(hit->id);
      i += hit->match.size();
      start = i;
    }
    between(start, text.size());
  }

  // `raw`: the text between two added tokens; `at_origin`: whether it starts the text (offset 0
  // of the original, what Metaspace's prepend_scheme first asks).
  void encode_plain(std::string_view raw, bool at_origin, std::vector<int>& ids, scratch& s) const {
    const std::string normalized = normalize(raw, s);
    split_at_added(norm_trie_, normalized, ids, [&](size_t b, size_t e) {
      encode_normalized(normalized.substr(b, e - b), at_origin && b == 0, ids, s);
    });
  }

  // `normalized`: normalized text between added tokens; `at_origin`: whether it starts the text.
  void encode_normalized(const std::string& normalized, bool at_origin, std::vector<int>& ids, scratch& s) const {
    std::vector<std::pair<size_t, size_t>> pieces = {{0, normalized.size()}}, next;  // byte ranges
    for (const pre_step& step : steps_) {
      next.clear();
      for (const auto& [b, e] : pieces) split_piece(step, normalized, b, e, s, next);
      std::swap(pieces, next);
    }
    if (!metaspace_) {
      for (const auto& [b, e] : pieces) bpe(std::string_view(normalized).substr(b, e - b), ids);
      return;
    }
    // Metaspace (tokenizers' pre_tokenizers/metaspace.rs, pre_tokenize): each piece's spaces
    // become the replacement; it is prepended unless the piece starts with it (always; first: only
    // to the piece at offset 0 of the original); with split, a piece starts before every
    // replacement (SplitDelimiterBehavior::MergedWithNext on the single character).
    const pre_step split{meta_re_, split_behavior::merged_with_next, false};
    for (const auto& [b, e] : pieces) {
      if (e == b) continue;
      std::string t;
      for (size_t i = b; i < e; ++i) {
        if (normalized[i] == ' ')
          t += meta_rep_;
        else
          t += normalized[i];
      }
      const bool prepend =
          !t.starts_with(meta_rep_) &&
          (meta_scheme_ == prepend_scheme::always || (meta_scheme_ == prepend_scheme::first && at_origin && b == 0));
      if (prepend) t.insert(0, meta_rep_);
      if (!meta_split_) {
        bpe(t, ids);
        continue;
      }
      next.clear();
      split_piece(split, t, 0, t.size(), s, next);
      for (const auto& [pb, pe] : next) bpe(std::string_view(t).substr(pb, pe - pb), ids);
    }
  }

  // One piece [b, e) of text through a Split or Digits step, as the tokenizers library's
  // NormalizedString::split: matches and the text between them, `invert` flips which is which,
  // the behaviour merges or removes the matches; empty pieces are dropped.
  // The code points of text[b, e) into s.cps, their byte offsets (and e) into s.at.
  static void code_points(std::string_view text, size_t b, size_t e, scratch& s) {
    s.cps.clear(), s.at.clear();
    for (size_t i = b; i < e;) {
      const utf8_step u = decode_utf8_at(text.substr(0, e), i);
      s.cps.push_back(u.ok ? u.cp : char32_t(0xDC00 + u.cp));  // an invalid byte: a lone surrogate, never L/N/space
      s.at.push_back(i);
      i += size_t(u.len);
    }
    s.at.push_back(e);
  }

  static void split_piece(const pre_step& step, const std::string& text, size_t b, size_t e, scratch& s,
                          std::vector<std::pair<size_t, size_t>>& out) {
    code_points(text, b, e, s);
    if (step.kind != pre_step::split) {  // runs of one class, the spaces dropped
      const bool words = step.kind == pre_step::whitespace;
      auto cls = [words](char32_t c) { return is_white_space(c) ? 0 : !words ? 1 : is_word_char(c) ? 1 : 2; };
      for (size_t k = 0; k < s.cps.size();) {
        const int c = cls(s.cps[k]);
        size_t m = k + 1;
        while (m < s.cps.size() && cls(s.cps[m]) == c) ++m;
        if (c != 0) out.push_back({s.at[k], s.at[m]});
        k = m;
      }
      return;
    }
    s.matches.clear(), s.parts.clear();
    if (step.re) {
      step.re->find_all(s.cps, s.matches);
    } else {  // Digits: each \p{N} code point is a match of its own
      for (size_t k = 0; k < s.cps.size(); ++k)
        if (unicode_category(s.cps[k]) >= 8 && unicode_category(s.cps[k]) <= 10) s.matches.push_back({k, k + 1});
    }
    size_t prev = 0;
    for (const regex::match& m : s.matches) {
      if (m.begin > prev) s.parts.push_back({{s.at[prev], s.at[m.begin]}, false});
      s.parts.push_back({{s.at[m.begin], s.at[m.end]}, true});
      prev = m.end;
    }
    if (prev < s.cps.size()) s.parts.push_back({{s.at[prev], e}, false});
    if (step.invert)
      for (auto& p : s.parts) p.second = !p.second;
    if (step.behavior == split_behavior::isolated) {  // every part a piece
      for (const auto& p : s.parts) out.push_back(p.first);
      return;
    }
    std::vector<std::pair<std::pair<size_t, size_t>, bool>>& kept = s.kept;  // range, removed
    kept.clear();
    bool previous_match = false;
    switch (step.behavior) {
      case split_behavior::isolated:
        break;
      case split_behavior::removed:
        kept = s.parts;
        break;
      case split_behavior::contiguous:
        for (const auto& p : s.parts) {
          if (p.second == previous_match && !kept.empty())
            kept.back().first.second = p.first.second;
          else
            kept.push_back({p.first, false});
          previous_match = p.second;
        }
        break;
      case split_behavior::merged_with_previous:
        for (const auto& p : s.parts) {
          if (p.second && !previous_match && !kept.empty())
            kept.back().first.second = p.first.second;
          else
            kept.push_back({p.first, false});
          previous_match = p.second;
        }
        break;
      case split_behavior::merged_with_next:
        for (size_t k = s.parts.size(); k-- > 0;) {
          const auto& p = s.parts[k];
          if (p.second && !previous_match && !kept.empty())
            kept.back().first.first = p.first.first;
          else
            kept.push_back({p.first, false});
          previous_match = p.second;
        }
        std::reverse(kept.begin(), kept.end());
        break;
    }
    for (const auto& [r, removed] : kept)
      if (!removed && r.second > r.first) out.push_back(r);
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
    std::string mapped;  // ByteLevel: the piece's bytes in GPT-2's alphabet
    if (byte_level_)
      for (unsigned char b : piece) mapped += byte_char_[b];
    const std::string_view word = byte_level_ ? std::string_view(mapped) : piece;
    if (ignore_merges_) {  // tokenizers' BPE: a whole word found in the vocabulary is not merged
      auto it = model_vocab_.find(std::string(word));
      if (it != model_vocab_.end()) {
        ids.push_back(it->second);
        return;
      }
    }
    // The initial symbols (tokenizers' models/bpe/model.rs, merge_word): each code point, with
    // continuing_subword_prefix before it unless it is the first and end_of_word_suffix after it
    // when it is the last (model.rs@3ba8ad0 lines 481-492), in the vocabulary; else, with
    // byte_fallback, that string's UTF-8 bytes (the prefix's and suffix's too, lines 501-509) as
    // <0xXX> tokens when all of them are in the vocabulary; else the unknown token (consecutive
    // ones fused into one with fuse_unk; a pending unknown is written only before the next code
    // point found in the vocabulary, or at the end, as there); else nothing.
    std::vector<std::string> sym;
    bool unk_pending = false;
    for (size_t i = 0; i < word.size();) {
      const int len = decode_utf8_at(word, i).len;
      std::string c(word.substr(i, size_t(len)));
      if (i > 0) c.insert(0, subword_prefix_);
      i += size_t(len);
      if (i == word.size()) c += word_suffix_;
      if (model_vocab_.count(c)) {
        if (unk_pending) sym.push_back(unk_piece_), unk_pending = false;
        sym.push_back(c);
        continue;
      }
      if (byte_fallback_) {
        std::vector<std::string> bytes;
        for (unsigned char b : c) {
          std::string t = fmt::format("<0x{:02X}>", b);
          if (!model_vocab_.count(t)) break;
          bytes.push_back(std::move(t));
        }
        if (bytes.size() == c.size()) {
          sym.insert(sym.end(), bytes.begin(), bytes.end());
          continue;
        }
      }
      if (unk_id_ < 0) continue;
      if (unk_pending && !fuse_unk_) sym.push_back(unk_piece_);
      unk_pending = true;
    }
    if (unk_pending) sym.push_back(unk_piece_);
    // Symbols in a linked list; candidate pairs in a heap ordered by (rank, left position), so
    // each merge costs O(log n) and a pre-token of n symbols O(n log n) (the same merges as
    // rescanning for the lowest-ranked leftmost pair every time, which is O(n^2)).
    const int n = static_cast<int>(sym.size());
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
      // The merge of a and b is a followed by b less its continuing_subword_prefix
      // (model.rs@3ba8ad0 lines 246-272).
      const std::string& right = sym[c.right];
      const size_t skip = !subword_prefix_.empty() && right.starts_with(subword_prefix_) ? subword_prefix_.size() : 0;
      sym[c.left].append(right, skip, std::string::npos);
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
      auto it = model_vocab_.find(s);
      if (it == model_vocab_.end()) fail("tokenizer {}: merged symbol '{}' is not in model.vocab", source_, clip(s));
      out.push_back(it->second);
    }
    ids.insert(ids.end(), out.begin(), out.end());
    std::lock_guard<std::mutex> lock(cache_mutex_);
    // Short pieces only: words repeat, a megabyte-long pre-token does not (and would bloat the cache).
    if (cache_.size() < (1u << 20) && piece.size() <= 64) cache_.emplace(std::string(piece), std::move(out));
  }

  std::vector<norm_step> normalizers_;  // the normalizer's steps, in order
  std::vector<pre_step> steps_;         // the pre-tokenizer's splits, in order
  bool byte_level_ = false;             // ByteLevel (or the default split): pieces mapped to GPT-2's byte alphabet
  bool metaspace_ = false;              // Metaspace ends the pre-tokenizer
  std::string meta_rep_;                // its replacement character (UTF-8)
  prepend_scheme meta_scheme_ = prepend_scheme::always;
  bool meta_split_ = true;
  std::shared_ptr<const regex> meta_re_;  // the replacement as a pattern
  std::string space_piece_;               // decode: what a Replace normalizer writes for a space
  bool byte_fallback_ = false, fuse_unk_ = false;
  int unk_id_ = -1;             // model.unk_token's id, or -1
  std::string unk_piece_;       // model.unk_token
  bool ignore_merges_ = false;  // model.ignore_merges: a piece in the vocabulary is one token
  std::string subword_prefix_;  // model.continuing_subword_prefix: before every symbol but a word's first
  std::string word_suffix_;     // model.end_of_word_suffix: after a word's last symbol
  std::unordered_map<std::string, int> vocab_;
  std::unordered_map<std::string, int> model_vocab_;  // model.vocab only (not added tokens)
  std::unordered_map<std::string, int> ranks_;
  std::vector<added_token> added_;
  added_trie raw_trie_;                          // the contents of the tokens with normalized false
  added_trie norm_trie_;                         // the normalized forms of the tokens with normalized true
  std::unordered_map<int, size_t> added_by_id_;  // id -> index into added_
  std::vector<std::string> pieces_;
  std::string byte_char_[256];
  std::unordered_map<std::string, char> char_byte_;
  mutable std::mutex cache_mutex_;
  mutable std::unordered_map<std::string, std::vector<int>> cache_;
};

}  // namespace

std::unique_ptr<tokenizer> load_hf_tokenizer(const std::string& path) { return std::make_unique<bpe_tokenizer>(path); }

std::unique_ptr<tokenizer> make_bpe_tokenizer(const bpe_vocab& v, const std::string& what, const std::string& source) {
  // The tokenizer.json that Hugging Face ships for each pre-tokenizer llama.cpp names.
  nlohmann::json j, vocab = nlohmann::json::object(), added = nlohmann::json::array();
  for (const auto& [piece, id] : v.tokens) vocab[piece] = id;
  for (const auto& [piece, id] : v.added) added.push_back({{"content", piece}, {"id", id}});
  const char* pattern = nullptr;
  if (v.pre == "qwen2") {
    pattern = kQwen2Split;
    j["normalizer"] = {{"type", "NFC"}};
  } else if (v.pre == "llama-bpe") {
    pattern = kLlama3Split;
  } else if (v.pre == "gpt-2") {
    // ggml-org/llama.cpp@c392e5094 src/llama-vocab.cpp:1511-1522 maps "gpt-2" to
    // LLAMA_VOCAB_PRE_TYPE_GPT2 and sets no other flag (ignore_merges stays false, line 1237; no
    // normalizer); lines 340-347 give that type the one regex kLlamaCppGpt2Split.
    pattern = kLlamaCppGpt2Split;
  } else {
    fail("{}: tokenizer.ggml.pre '{}' not supported (expected qwen2, llama-bpe or gpt-2)", what, v.pre);
  }
  j["model"] = {
      {"type", "BPE"}, {"vocab", std::move(vocab)}, {"merges", v.merges}, {"ignore_merges", v.pre == "llama-bpe"}};
  j["added_tokens"] = std::move(added);
  j["pre_tokenizer"] = {{"type", "Sequence"},
                        {"pretokenizers",
                         {{{"type", "Split"}, {"pattern", {{"Regex", pattern}}}, {"behavior", "Isolated"}},
                          {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}}}};
  return std::make_unique<bpe_tokenizer>(j, what, source);
}

}  // namespace attnum::model
