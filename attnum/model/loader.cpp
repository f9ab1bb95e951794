#include "attnum/model/loader.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <sstream>

#include <fmt/format.h>

#include "attnum/core/error.h"
#include "attnum/core/file.h"
#include "attnum/model/gguf.h"
#include "attnum/model/hf_checkpoint.h"
#include "attnum/model/llama2c.h"

namespace attnum::model {
namespace fs = std::filesystem;

namespace {
// Refuses a NaN or infinite weight, naming the tensor and the element: every result of such a
// model would be NaN (or an argmax of NaN logits).
void require_finite_weights(const weights& w, const std::string& path) {
  auto bad = [&](const std::string& name, size_t i, float x) {
    fail("{}: weight {}[{}] is {}: the model holds non-finite weights", path, name, i, x);
  };
  for_each_tensor(
      w,
      [&](const std::string& name, const matrix& m) {  // widened a chunk at a time, never as a whole
        m.for_each_chunk([&](size_t b, const float* x, size_t n) {
          for (size_t i = 0; i < n; ++i)
            if (!std::isfinite(x[i])) bad(name, b + i, x[i]);
          return true;
        });
      },
      [&](const std::string& name, const std::vector<float>& v) {
        for (size_t i = 0; i < v.size(); ++i)
          if (!std::isfinite(v[i])) bad(name, i, v[i]);
      });
}

weights load_any(const std::string& path) {
  std::error_code ec;  // a path the system refuses (too long, no permission) is an error naming it
  if (fs::is_directory(path, ec)) return load_hf_checkpoint(path);
  if (!fs::exists(path, ec)) fail("{}: no such model file or folder{}", clip(path), ec ? ": " + ec.message() : "");
  if (fs::path(path).filename() == "config.json") return load_hf_checkpoint(fs::path(path).parent_path());
  if (is_gguf_file(path) || fs::path(path).extension() == ".gguf") return load_gguf(path);
  return load_llama2c(path);
}
}  // namespace

weights load_model(const std::string& path) {
  weights w = load_any(path);
  require_finite_weights(w, path);
  return w;
}

weights load_model(const std::string& path, const std::function<layer_slice(const config&)>& slice_of) {
  weights w = load_any(path);
  keep_slice(w, slice_of(w.cfg));
  require_finite_weights(w, path);  // the slice's tensors only: the rest is never read
  return w;
}

namespace {
std::unique_ptr<tokenizer> open_tokenizer(const std::string& model_path, const weights& w,
                                          const std::string& override_path) {
  if (!override_path.empty()) {
    if (fs::path(override_path).extension() == ".json") return load_hf_tokenizer(override_path);
    return load_llama2c_tokenizer(override_path, w.cfg.vocab_size);
  }
  if (fs::is_directory(model_path)) {
    const fs::path p = fs::path(model_path) / "tokenizer.json";
    if (!fs::exists(p)) fail("{}: no tokenizer.json (use --tokenizer PATH)", model_path);
    return load_hf_tokenizer(p.string());
  }
  if (is_gguf_file(model_path) || fs::path(model_path).extension() == ".gguf") return load_gguf_tokenizer(model_path);
  const fs::path dir = fs::path(model_path).parent_path();
  for (const char* name : {"tok512.bin", "tokenizer.bin"})
    if (fs::exists(dir / name)) return load_llama2c_tokenizer((dir / name).string(), w.cfg.vocab_size);
  fail("{}: no tok512.bin or tokenizer.bin beside the model (use --tokenizer PATH)", model_path);
}
}  // namespace

std::unique_ptr<tokenizer> load_tokenizer(const std::string& model_path, const weights& w,
                                          const std::string& override_path) {
  auto tok = open_tokenizer(model_path, w, override_path);
  // Ids at or above the model's vocab_size would index past its embedding table.
  if (tok->size() > w.cfg.vocab_size)
    fail("{}: the tokenizer has {} tokens, the model's vocab_size is {} (wrong tokenizer?)",
         override_path.empty() ? model_path : override_path, tok->size(), w.cfg.vocab_size);
  return tok;
}

std::vector<int> tokenize_file(const std::string& path, const tokenizer& tok, const weights& w) {
  std::vector<int> ids;
  if (w.cfg.bos_id >= 0) ids.push_back(w.cfg.bos_id);
  const std::vector<int> body = tok.encode(read_file(path));
  ids.insert(ids.end(), body.begin(), body.end());
  return ids;
}

std::vector<int> read_token_ids(const std::string& path) {
  std::istringstream f(read_file(path));  // read_file: a regular file, never a FIFO or folder
  std::vector<int> ids;
  std::string word;
  while (f >> word) {
    size_t used = 0;
    long v = -1;
    try {
      v = std::stol(word, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != word.size() || v < 0 || v > INT32_MAX)
      fail("{}: token {}: expected a non-negative integer id, got '{}'", path, ids.size(), clip(word));
    ids.push_back(int(v));
  }
  return ids;
}

std::vector<std::string> default_texts() {
  const std::vector<std::string> paths = {
      "/usr/share/gocode/src/github.com/pierrec/lz4/testdata/pg1661.txt",
      "/usr/share/gocode/src/github.com/pierrec/lz4/testdata/Mark.Twain-Tom.Sawyer.txt",
      "/usr/share/gocode/src/github.com/andybalholm/brotli/testdata/Isaac.Newton-Opticks.txt"};
  for (const auto& p : paths)
    if (!fs::exists(p))
      fail(
          "{}: default text missing (install golang-github-pierrec-lz4-dev and "
          "golang-github-andybalholm-brotli-dev, or pass --text)",
          p);
  return paths;
}

}  // namespace attnum::model
