// llama2.c's tokenizer (run.c encode/decode), with the merge loop done by a heap so whole books
// tokenize in O(n log n); the merge order (highest score first, leftmost among equal scores) is
// run.c's, so the ids are identical.
#include <cmath>
#include <cstring>
#include <filesystem>
#include <queue>
#include <unordered_map>

#include "attnum/core/error.h"
#include "attnum/io/mapped_file.h"
#include "attnum/model/tokenizer.h"
#include "attnum/model/weights.h"

namespace attnum::model {
namespace {

class llama2c_tokenizer final : public tokenizer {
 public:
  llama2c_tokenizer(const std::string& path, int vocab_size) {
    // Byte fallback uses ids 3..258 (<0x00>..<0xFF>), so a smaller vocabulary cannot encode text.
    if (vocab_size < 259 || vocab_size >= (1 << 24))
      fail("{}: vocab_size {} out of range: a llama2.c tokenizer needs 259 <= vocab_size < 2^24", path, vocab_size);
    io::mapped_file f(path);
    size_t pos = 0;
    auto need = [&](size_t n, const char* what, int i) {
      if (pos + n > f.size())
        fail("{}: truncated at token {} ({}): need {} bytes at offset {}, file has {}", path, i, what, n, pos,
             f.size());
    };
    need(4, "max_token_length", -1);
    int32_t max_len;
    std::memcpy(&max_len, f.data(), 4);
    pos = 4;
    if (max_len <= 0 || max_len > 1 << 16) fail("{}: max_token_length {} out of range", path, max_len);
    vocab_.resize(vocab_size);
    scores_.resize(vocab_size);
    for (int i = 0; i < vocab_size; ++i) {
      need(8, "score and length", i);
      int32_t len;
      std::memcpy(&scores_[i], f.data() + pos, 4);
      std::memcpy(&len, f.data() + pos + 4, 4);
      pos += 8;
      if (std::isnan(scores_[i])) fail("{}: token {}: score is NaN", path, i);
      if (len < 0 || len > max_len)
        fail("{}: token {} has length {}, expected 0..max_token_length {}", path, i, len, max_len);
      need(len, "bytes", i);
      vocab_[i].assign(reinterpret_cast<const char*>(f.data() + pos), len);
      pos += len;
      lookup_.emplace(vocab_[i], i);  // first id wins on duplicates
    }
    // More tokens than the model's vocabulary: the tokenizer belongs to another model, and
    // its extra ids would index past the embedding table.
    if (pos != f.size())
      fail(
          "{}: {} bytes after the model's vocab_size {} tokens: the tokenizer has more tokens than "
          "the model (wrong tokenizer?)",
          path, f.size() - pos, vocab_size);
    source_ = fmt::format("{}:{}", std::filesystem::path(path).filename().string(), fnv1a_hex(f.data(), f.size()));
  }

  std::vector<int> encode(std::string_view text) const override {
    std::vector<int> ids;
    if (text.empty()) return ids;
    if (auto it = lookup_.find(" "); it != lookup_.end()) ids.push_back(it->second);  // dummy prefix
    // 1. One token per UTF-8 code point, or its bytes (+3: ids 3..258 are <0x00>..<0xFF>).
    for (size_t i = 0; i < text.size();) {
      size_t len = 1;
      while (i + len < text.size() && len < 4 && (static_cast<unsigned char>(text[i + len]) & 0xC0) == 0x80) ++len;
      auto it = lookup_.find(std::string(text.substr(i, len)));
      if (it != lookup_.end()) {
        ids.push_back(it->second);
      } else {
        for (size_t b = 0; b < len; ++b) ids.push_back(static_cast<unsigned char>(text[i + b]) + 3);
      }
      i += len;
    }
    merge(ids);
    return ids;
  }

  std::string decode(int prev, int id) const override {
    if (id < 0 || id >= size()) fail("token id {} outside the vocabulary (0..{})", id, size() - 1);
    std::string_view piece = vocab_[id];
    if (prev == 1 && !piece.empty() && piece[0] == ' ') piece.remove_prefix(1);
    unsigned byte;
    if (piece.size() == 6 && std::sscanf(std::string(piece).c_str(), "<0x%02X>", &byte) == 1)
      return std::string(1, static_cast<char>(byte));
    return std::string(piece);
  }

  int size() const override { return static_cast<int>(vocab_.size()); }

 private:
  struct candidate {
    float score;
    int left, right;  // node indices (list order = index order)
    int id;
    uint32_t left_version, right_version;
    bool operator<(const candidate& o) const {  // max-heap: higher score, then smaller index
      return score != o.score ? score < o.score : left > o.left;
    }
  };

  // 2. Repeatedly merge the adjacent pair whose concatenation is the highest-scoring token.
  void merge(std::vector<int>& ids) const {
    const int n = static_cast<int>(ids.size());
    std::vector<int> next(n), prev(n);
    std::vector<uint32_t> version(n, 0);
    for (int i = 0; i < n; ++i) next[i] = i + 1 < n ? i + 1 : -1, prev[i] = i - 1;
    std::priority_queue<candidate> heap;
    auto push = [&](int l) {
      if (l < 0 || next[l] < 0) return;
      int r = next[l];
      auto it = lookup_.find(vocab_[ids[l]] + vocab_[ids[r]]);
      if (it != lookup_.end() && scores_[it->second] > -1e10f)  // run.c's initial best_score
        heap.push({scores_[it->second], l, r, it->second, version[l], version[r]});
    };
    for (int i = 0; i + 1 < n; ++i) push(i);
    while (!heap.empty()) {
      candidate c = heap.top();
      heap.pop();
      if (version[c.left] != c.left_version || version[c.right] != c.right_version || next[c.left] != c.right)
        continue;  // stale: one side was merged since
      ids[c.left] = c.id;
      ++version[c.left];
      ++version[c.right];  // the right node is gone
      next[c.left] = next[c.right];
      if (next[c.left] >= 0) prev[next[c.left]] = c.left;
      push(prev[c.left]);
      push(c.left);
    }
    std::vector<int> out;
    for (int i = n > 0 ? 0 : -1; i >= 0; i = next[i]) out.push_back(ids[i]);
    ids = std::move(out);
  }

  std::vector<std::string> vocab_;
  std::vector<float> scores_;
  std::unordered_map<std::string, int> lookup_;
};

}  // namespace

std::unique_ptr<tokenizer> load_llama2c_tokenizer(const std::string& path, int vocab_size) {
  return std::make_unique<llama2c_tokenizer>(path, vocab_size);
}

}  // namespace attnum::model
