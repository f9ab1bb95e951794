// GGUF reader. The layout, from ggml-org/llama.cpp@a458664fc83b6513baea7adafcb0ef0626b006f8
// docs/gguf.md and ggml/src/gguf.cpp (gguf_init_from_file_impl), all little-endian:
//   uint32 magic "GGUF", uint32 version (2 or 3; 1 had 32-bit counts), uint64 tensor_count,
//   uint64 metadata_kv_count; kv: string key, uint32 value type, value; tensor info: string name,
//   uint32 n_dims (<= 4), uint64 ne[n_dims] (ne[0] the contiguous dimension), uint32 ggml type,
//   uint64 offset (relative to the data section, a multiple of the alignment); then padding to
//   general.alignment (default 32, a power of two) and the data section.
//   string = uint64 length + bytes (no terminator); value types: 0 u8, 1 i8, 2 u16, 3 i16,
//   4 u32, 5 i32, 6 f32, 7 bool, 8 string, 9 array (uint32 type, uint64 count, elements),
//   10 u64, 11 i64, 12 f64.
// A tensor of ne[0] x ne[1] holds ne[1] rows of ne[0] elements: a Hugging Face [out, in] weight
// is stored with ne = {in, out} and the same bytes.
#include "attnum/model/gguf.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <variant>

#include <fmt/ranges.h>

#include "attnum/core/error.h"
#include "attnum/io/mapped_file.h"
#include "attnum/io/safetensors.h"
#include "attnum/model/tokenizer_llamacpp_spm.h"

namespace attnum::model {
namespace fs = std::filesystem;
namespace {

// ggml_type ids (ggml/include/ggml.h enum ggml_type at the commit above), for naming refused
// tensors; 4, 5 and 31-33, 36-38 are retired.
std::string ggml_type_name(uint32_t t) {
  static const char* const names[] = {"F32",     "F16",    "Q4_0",    "Q4_1",  nullptr,  nullptr, "Q5_0",  "Q5_1",
                                      "Q8_0",    "Q8_1",   "Q2_K",    "Q3_K",  "Q4_K",   "Q5_K",  "Q6_K",  "Q8_K",
                                      "IQ2_XXS", "IQ2_XS", "IQ3_XXS", "IQ1_S", "IQ4_NL", "IQ3_S", "IQ2_S", "IQ4_XS",
                                      "I8",      "I16",    "I32",     "I64",   "F64",    "IQ1_M", "BF16",  nullptr,
                                      nullptr,   nullptr,  "TQ1_0",   "TQ2_0", nullptr,  nullptr, nullptr, "MXFP4"};
  if (t < std::size(names) && names[t]) return names[t];
  return fmt::format("type {}", t);
}
enum : uint32_t { kF32 = 0, kF16 = 1, kQ8_0 = 8, kBF16 = 30 };
constexpr uint64_t kQK8_0 = 32;      // ggml-common.h: #define QK8_0 32
constexpr uint64_t kQ8_0Bytes = 34;  // block_q8_0 { ggml_half d; int8_t qs[QK8_0]; }

// Bounds: a key or string at most this long (real keys are short; tokens and chat templates
// under a megabyte), at most this many tensors and keys, dimensions and counts as ints.
constexpr uint64_t kMaxString = uint64_t{1} << 24;
constexpr uint64_t kMaxCount = uint64_t{1} << 24;
constexpr int64_t kMaxDim = (int64_t{1} << 31) - 1;

struct gguf_array {
  uint32_t type = 0;
  std::vector<int64_t> ints;         // integer and bool elements
  std::vector<double> reals;         // f32 / f64 elements
  std::vector<std::string> strings;  // string elements
  uint64_t count = 0;
};
struct gguf_value {
  uint32_t type = 0;
  std::variant<int64_t, uint64_t, double, bool, std::string, gguf_array> v;
};

struct gguf_tensor {
  std::string name;
  uint32_t type = 0;
  std::vector<int64_t> ne;  // ne[0] contiguous
  uint64_t offset = 0;
  const uint8_t* data = nullptr;
  uint64_t nbytes = 0;
  uint64_t numel = 1;
};

const char* value_type_name(uint32_t t) {
  static const char* const n[] = {"uint8", "int8",   "uint16", "int16",  "uint32", "int32",  "float32",
                                  "bool",  "string", "array",  "uint64", "int64",  "float64"};
  return t < std::size(n) ? n[t] : "unknown";
}

// A validated GGUF file: header, metadata and tensor infos parsed, every tensor's range checked.
class gguf_file {
 public:
  explicit gguf_file(const std::string& path) : file_(std::make_shared<io::mapped_file>(path)) { parse(); }
  const std::string& path() const { return file_->path(); }
  std::shared_ptr<const io::mapped_file> file() const { return file_; }
  const std::map<std::string, gguf_value>& kv() const { return kv_; }
  const std::map<std::string, gguf_tensor>& tensors() const { return tensors_; }
  const gguf_value* find(const std::string& key) const {
    auto it = kv_.find(key);
    return it == kv_.end() ? nullptr : &it->second;
  }
  uint64_t header_bytes() const { return data_start_; }

 private:
  [[noreturn]] void bad(const std::string& what) const {
    fail("{}: {} (at byte {} of {}): not a valid GGUF file", path(), what, pos_, file_->size());
  }
  void need(uint64_t n, const std::string& what) const {
    if (n > file_->size() - pos_) bad(fmt::format("{}: needs {} bytes, {} left", what, n, file_->size() - pos_));
  }
  template <typename T>
  T read(const std::string& what) {
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, file_->data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  std::string str(const std::string& what) {
    const uint64_t n = read<uint64_t>(what + " length");
    if (n > kMaxString) bad(fmt::format("{}: length {} exceeds {}", what, n, kMaxString));
    need(n, what);
    std::string s(reinterpret_cast<const char*>(file_->data() + pos_), n);
    pos_ += n;
    return s;
  }
  // Elements of `type` need at least this many bytes each (a string its 8-byte length).
  static uint64_t min_size(uint32_t type) {
    switch (type) {
      case 0:
      case 1:
      case 7:
        return 1;
      case 2:
      case 3:
        return 2;
      case 4:
      case 5:
      case 6:
        return 4;
      default:
        return 8;
    }
  }
  // A scalar of `type` (not an array) into ints / reals / strings or the value.
  void scalar(uint32_t type, const std::string& what, gguf_value* out, gguf_array* arr) {
    auto put_int = [&](int64_t x) { arr ? arr->ints.push_back(x) : void(out->v = x); };
    switch (type) {
      case 0:
        return put_int(read<uint8_t>(what));
      case 1:
        return put_int(read<int8_t>(what));
      case 2:
        return put_int(read<uint16_t>(what));
      case 3:
        return put_int(read<int16_t>(what));
      case 4:
        return put_int(read<uint32_t>(what));
      case 5:
        return put_int(read<int32_t>(what));
      case 11:
        return put_int(read<int64_t>(what));
      case 10: {
        const uint64_t x = read<uint64_t>(what);
        if (arr) {
          arr->ints.push_back(x > uint64_t(INT64_MAX) ? INT64_MAX : int64_t(x));
        } else {
          out->v = x;
        }
        return;
      }
      case 6: {
        const double x = read<float>(what);
        arr ? arr->reals.push_back(x) : void(out->v = x);
        return;
      }
      case 12: {
        const double x = read<double>(what);
        arr ? arr->reals.push_back(x) : void(out->v = x);
        return;
      }
      case 7: {
        const uint8_t b = read<uint8_t>(what);
        if (b > 1) bad(fmt::format("{}: bool byte {} (expected 0 or 1)", what, b));
        arr ? arr->ints.push_back(b) : void(out->v = bool(b));
        return;
      }
      case 8: {
        std::string s = str(what);
        arr ? arr->strings.push_back(std::move(s)) : void(out->v = std::move(s));
        return;
      }
      default:
        bad(fmt::format("{}: value type {} (expected 0..12)", what, type));
    }
  }

  void parse() {
    const auto& f = *file_;
    if (f.size() < 4 || std::memcmp(f.data(), "GGUF", 4) != 0) bad("magic: expected \"GGUF\"");
    pos_ = 4;
    const uint32_t version = read<uint32_t>("version");
    if (version == 1) bad("version 1 (32-bit counts) not supported; expected 2 or 3");
    if (version != 2 && version != 3)
      bad(fmt::format("version {}: expected 2 or 3 (a big-endian file reads as {})", version, uint32_t(3) << 24));
    const uint64_t n_tensors = read<uint64_t>("tensor_count");
    const uint64_t n_kv = read<uint64_t>("metadata_kv_count");
    if (n_tensors > kMaxCount) bad(fmt::format("tensor_count {} exceeds {}", n_tensors, kMaxCount));
    if (n_kv > kMaxCount) bad(fmt::format("metadata_kv_count {} exceeds {}", n_kv, kMaxCount));
    for (uint64_t i = 0; i < n_kv; ++i) {
      std::string key = str(fmt::format("metadata key {}", i));
      if (key.empty()) bad(fmt::format("metadata key {} is empty", i));
      const std::string what = "metadata " + key;
      gguf_value val;
      val.type = read<uint32_t>(what + " type");
      if (val.type == 9) {
        gguf_array a;
        a.type = read<uint32_t>(what + " array type");
        a.count = read<uint64_t>(what + " array count");
        if (a.type == 9) bad(what + ": arrays of arrays not supported");
        if (a.type > 12) bad(fmt::format("{}: array element type {} (expected 0..12)", what, a.type));
        // Refused before allocating: the elements cannot take fewer bytes than the file has left.
        if (a.count > (f.size() - pos_) / min_size(a.type))
          bad(fmt::format("{}: array count {} does not fit in the {} bytes left", what, a.count, f.size() - pos_));
        if (a.type == 8)
          a.strings.reserve(a.count);
        else if (a.type == 6 || a.type == 12)
          a.reals.reserve(a.count);
        else
          a.ints.reserve(a.count);
        for (uint64_t k = 0; k < a.count; ++k) scalar(a.type, what, nullptr, &a);
        val.v = std::move(a);
      } else {
        scalar(val.type, what, &val, nullptr);
      }
      if (!kv_.emplace(key, std::move(val)).second) bad("duplicate metadata key " + key);
    }
    uint64_t alignment = 32;  // GGUF_DEFAULT_ALIGNMENT
    if (const gguf_value* a = find("general.alignment")) {
      if (a->type != 4 || std::get<int64_t>(a->v) <= 0 || (std::get<int64_t>(a->v) & (std::get<int64_t>(a->v) - 1)))
        bad("general.alignment: expected a uint32 power of two");
      alignment = uint64_t(std::get<int64_t>(a->v));
    }
    std::vector<gguf_tensor*> order;
    for (uint64_t i = 0; i < n_tensors; ++i) {
      gguf_tensor t;
      t.name = str(fmt::format("tensor {} name", i));
      const std::string what = "tensor " + t.name;
      const uint32_t n_dims = read<uint32_t>(what + " n_dims");
      if (n_dims < 1 || n_dims > 4) bad(fmt::format("{}: n_dims {} (expected 1..4)", what, n_dims));
      for (uint32_t d = 0; d < n_dims; ++d) {
        const uint64_t ne = read<uint64_t>(fmt::format("{} ne[{}]", what, d));
        if (ne < 1 || ne > uint64_t(kMaxDim))
          bad(fmt::format("{}: ne[{}] = {} (expected 1..{})", what, d, ne, kMaxDim));
        t.ne.push_back(int64_t(ne));
        if (__builtin_mul_overflow(t.numel, ne, &t.numel) || t.numel > (uint64_t(1) << 48))
          bad(fmt::format("{}: {} elements is too many", what, fmt::join(t.ne, " x ")));
      }
      t.type = read<uint32_t>(what + " type");
      t.offset = read<uint64_t>(what + " offset");
      switch (t.type) {
        case kF32:
          t.nbytes = t.numel * 4;
          break;
        case kF16:
        case kBF16:
          t.nbytes = t.numel * 2;
          break;
        case kQ8_0:
          if (t.ne[0] % kQK8_0 != 0)
            bad(fmt::format("{}: Q8_0 rows of {} elements (expected a multiple of {})", what, t.ne[0], kQK8_0));
          t.nbytes = t.numel / kQK8_0 * kQ8_0Bytes;
          break;
        default:
          fail("{}: tensor {} has type {}: not supported (expected F32, F16, BF16 or Q8_0)", path(), t.name,
               ggml_type_name(t.type));
      }
      if (t.offset % alignment != 0)
        bad(fmt::format("{}: offset {} is not a multiple of general.alignment {}", what, t.offset, alignment));
      auto [it, fresh] = tensors_.emplace(t.name, std::move(t));
      if (!fresh) bad("duplicate tensor " + it->first);
      order.push_back(&it->second);
    }
    data_start_ = (pos_ + alignment - 1) / alignment * alignment;
    // A file without tensors may end before the padding: ggml's reader seeks past it
    // (ggml-org/llama.cpp@c392e5094 ggml/src/gguf.cpp:591-592, fseek past the end succeeds), and
    // older writers left it out (llama.cpp's vocabulary-only models/ggml-vocab-*.gguf).
    if (data_start_ > f.size() && n_tensors == 0) data_start_ = f.size();
    if (data_start_ > f.size()) {
      pos_ = f.size();
      bad("data section: the padding after the tensor infos runs past the end of the file");
    }
    const uint64_t data_size = f.size() - data_start_;
    std::sort(order.begin(), order.end(), [](auto* a, auto* b) { return a->offset < b->offset; });
    uint64_t end = 0;
    for (gguf_tensor* t : order) {
      if (t->offset < end)
        fail("{}: tensor {}: data at offset {} overlaps the previous tensor (ends at {})", path(), t->name, t->offset,
             end);
      if (t->offset > data_size || t->nbytes > data_size - t->offset)
        fail("{}: tensor {}: data [{}, {}) past the end of the data section ({} bytes): truncated file?", path(),
             t->name, t->offset, t->offset + t->nbytes, data_size);
      t->data = f.data() + data_start_ + t->offset;
      end = t->offset + t->nbytes;
    }
  }

  std::shared_ptr<io::mapped_file> file_;
  uint64_t pos_ = 0;
  uint64_t data_start_ = 0;
  std::map<std::string, gguf_value> kv_;
  std::map<std::string, gguf_tensor> tensors_;
};

// Typed metadata access, errors naming the file and the key.
class meta {
 public:
  explicit meta(const gguf_file& f) : f_(f) {}
  bool has(const std::string& k) const { return f_.find(k) != nullptr; }
  const gguf_value& at(const std::string& k) const {
    const gguf_value* v = f_.find(k);
    if (!v) fail("{}: missing metadata key {}", f_.path(), k);
    return *v;
  }
  int64_t integer(const std::string& k, int64_t lo, int64_t hi) const {
    const gguf_value& v = at(k);
    int64_t x = 0;
    if (const auto* i = std::get_if<int64_t>(&v.v))
      x = *i;
    else if (const auto* u = std::get_if<uint64_t>(&v.v))
      x = *u > uint64_t(INT64_MAX) ? INT64_MAX : int64_t(*u);
    else
      fail("{}: metadata {} has type {}: expected an integer", f_.path(), k, value_type_name(v.type));
    if (x < lo || x > hi) fail("{}: metadata {} = {}: expected an integer in [{}, {}]", f_.path(), k, x, lo, hi);
    return x;
  }
  int64_t integer_or(const std::string& k, int64_t lo, int64_t hi, int64_t dflt) const {
    return has(k) ? integer(k, lo, hi) : dflt;
  }
  double real(const std::string& k, double lo, double hi) const {
    const gguf_value& v = at(k);
    const auto* d = std::get_if<double>(&v.v);
    if (!d) fail("{}: metadata {} has type {}: expected float32 or float64", f_.path(), k, value_type_name(v.type));
    if (!(*d > lo && *d <= hi)) fail("{}: metadata {} = {}: expected a number in ({}, {}]", f_.path(), k, *d, lo, hi);
    return *d;
  }
  bool boolean(const std::string& k) const {
    const gguf_value& v = at(k);
    const auto* b = std::get_if<bool>(&v.v);
    if (!b) fail("{}: metadata {} has type {}: expected bool", f_.path(), k, value_type_name(v.type));
    return *b;
  }
  std::string string(const std::string& k) const {
    const gguf_value& v = at(k);
    const auto* s = std::get_if<std::string>(&v.v);
    if (!s) fail("{}: metadata {} has type {}: expected string", f_.path(), k, value_type_name(v.type));
    return *s;
  }
  const gguf_array& array(const std::string& k, uint32_t elem) const {
    const gguf_value& v = at(k);
    const auto* a = std::get_if<gguf_array>(&v.v);
    if (!a || a->type != elem)
      fail("{}: metadata {}: expected an array of {}, got {}{}", f_.path(), k, value_type_name(elem),
           a ? "an array of " : "", a ? value_type_name(a->type) : value_type_name(v.type));
    return *a;
  }
  const std::string& path() const { return f_.path(); }

 private:
  const gguf_file& f_;
};

std::string architecture(const gguf_file& f, const meta& m) {
  const std::string arch = m.string("general.architecture");
  if (arch != "llama" && arch != "qwen2" && arch != "qwen3")
    fail("{}: general.architecture '{}' not supported (expected llama, qwen2 or qwen3)", f.path(), arch);
  return arch;
}

// Metadata keys that do not change the forward or the tokenizer: descriptions, provenance, the
// chat template, quantisation bookkeeping.
bool harmless_key(const std::string& k, const std::string& arch) {
  static const std::set<std::string> tokenizer = {
      "tokenizer.ggml.eos_token_id",       "tokenizer.ggml.padding_token_id", "tokenizer.ggml.unknown_token_id",
      "tokenizer.ggml.seperator_token_id", "tokenizer.ggml.eot_token_id",     "tokenizer.ggml.eom_token_id",
      "tokenizer.ggml.add_eos_token",      "tokenizer.ggml.add_sep_token",    "tokenizer.ggml.scores",
      "tokenizer.chat_template",           "tokenizer.ggml.fim_pre_token_id", "tokenizer.ggml.fim_suf_token_id",
      "tokenizer.ggml.fim_mid_token_id",   "tokenizer.ggml.fim_pad_token_id", "tokenizer.ggml.fim_rep_token_id",
      "tokenizer.ggml.fim_sep_token_id"};
  if (k.rfind("general.", 0) == 0 || k.rfind("quantize.", 0) == 0) return true;
  return tokenizer.count(k) || k == arch + ".vocab_size";  // vocab_size: checked against token_embd
}

// Keys this reader implements (for the model, then the tokenizer).
std::set<std::string> model_keys(const std::string& a) {
  return {a + ".block_count",
          a + ".context_length",
          a + ".embedding_length",
          a + ".feed_forward_length",
          a + ".attention.head_count",
          a + ".attention.head_count_kv",
          a + ".attention.layer_norm_rms_epsilon",
          a + ".rope.freq_base",
          a + ".rope.dimension_count",
          a + ".attention.key_length",
          a + ".attention.value_length",
          a + ".rope.scaling.type",
          a + ".rope.scaling.factor",
          a + ".rope.scaling.original_context_length"};
}
const std::set<std::string> kTokenizerKeys = {"tokenizer.ggml.model",        "tokenizer.ggml.tokens",
                                              "tokenizer.ggml.token_type",   "tokenizer.ggml.merges",
                                              "tokenizer.ggml.bos_token_id", "tokenizer.ggml.add_bos_token",
                                              "tokenizer.ggml.pre",          "tokenizer.ggml.add_space_prefix"};

void refuse_unknown_keys(const gguf_file& f, const std::string& arch) {
  const std::set<std::string> known = model_keys(arch);
  for (const auto& [k, v] : f.kv())
    if (!harmless_key(k, arch) && !known.count(k) && !kTokenizerKeys.count(k))
      fail("{}: metadata key {} is not supported for architecture '{}' (it may change the forward pass)", f.path(), k,
           arch);
}

// The tensors the forward reads, checked by shape (GGUF order: ne[0] = columns).
class tensor_reader {
 public:
  explicit tensor_reader(const gguf_file& f) : f_(f) {}
  bool has(const std::string& n) const { return f_.tensors().count(n) != 0; }
  const gguf_tensor& get(const std::string& name, std::vector<int64_t> ne) {
    auto it = f_.tensors().find(name);
    if (it == f_.tensors().end()) fail("{}: missing tensor {}", f_.path(), name);
    read_.insert(name);
    if (it->second.ne != ne)
      fail("{}: tensor {} has ne [{}], expected [{}]", f_.path(), name, fmt::join(it->second.ne, ", "),
           fmt::join(ne, ", "));
    return it->second;
  }
  // The tensor's elements as fp32 (Q8_0 dequantised as ggml does).
  std::vector<float> floats(const gguf_tensor& t) const {
    std::vector<float> out(t.numel);
    if (t.type == kQ8_0) {
      // ggml-org/llama.cpp@01243c587feceaa5d6a6c2305535ef2f549c48b8 ggml/src/ggml-quants.c
      // dequantize_row_q8_0: d = GGML_FP16_TO_FP32(x[i].d); y[i*qk + j] = x[i].qs[j]*d (int8
      // times float, in float: exact, 11 + 8 significant bits).
      for (uint64_t b = 0; b < t.numel / kQK8_0; ++b) {
        const uint8_t* blk = t.data + b * kQ8_0Bytes;
        float d;
        io::widen_to_float(io::st_dtype::F16, blk, 0, 1, &d);
        for (uint64_t j = 0; j < kQK8_0; ++j) out[b * kQK8_0 + j] = float(int8_t(blk[2 + j])) * d;
      }
    } else {
      io::widen_to_float(dtype(t), t.data, 0, t.numel, out.data());
    }
    return out;
  }
  std::vector<float> vec(const std::string& name, int64_t n) { return floats(get(name, {n})); }
  // A [rows, cols] matrix: F32/F16/BF16 in place in the mapped file, Q8_0 dequantised. With
  // heads > 0, rows are un-permuted per head (see unpermute).
  matrix mat(const std::string& name, int64_t rows, int64_t cols, int heads = 0) {
    const gguf_tensor& t = get(name, {cols, rows});
    if (heads == 0) {
      if (t.type == kQ8_0) return matrix(floats(t));
      return matrix(dtype(t), t.data, t.numel, f_.file());
    }
    const std::vector<int> src = unpermute_rows(rows, heads);
    if (t.type == kF16 || t.type == kBF16) {
      std::vector<uint16_t> bits(t.numel);
      for (int64_t r = 0; r < rows; ++r) std::memcpy(&bits[r * cols], t.data + uint64_t(src[r]) * cols * 2, cols * 2);
      return matrix::from_bits(dtype(t), std::move(bits));
    }
    const std::vector<float> x = floats(t);
    std::vector<float> y(t.numel);
    for (int64_t r = 0; r < rows; ++r) std::copy_n(&x[src[r] * cols], cols, &y[r * cols]);
    return matrix(std::move(y));
  }
  std::vector<float> permuted_vec(const std::string& name, int64_t n, int heads) {
    const std::vector<float> x = vec(name, n);
    const std::vector<int> src = unpermute_rows(n, heads);
    std::vector<float> y(n);
    for (int64_t r = 0; r < n; ++r) y[r] = x[src[r]];
    return y;
  }
  void check_all_read(const std::string& arch) const {
    for (const auto& [name, t] : f_.tensors())
      if (!read_.count(name))
        fail("{}: tensor {} is not read by the {} forward pass (unsupported model)", f_.path(), name, arch);
  }

  // llama.cpp's converter permutes the q and k rows of the llama architecture for its NORM
  // (interleaved-pair) RoPE: ggml-org/llama.cpp@a458664fc83b6513baea7adafcb0ef0626b006f8
  // convert_hf_to_gguf.py LlamaModel.permute:
  //   weights.reshape(n_head, 2, rows // n_head // 2, *rest).swapaxes(1, 2).reshape(weights.shape)
  // so stored row h*hd + 2i + s holds Hugging Face row h*hd + s*hd/2 + i. Returns, for each
  // Hugging Face row, the stored row it comes from.
  static std::vector<int> unpermute_rows(int64_t rows, int heads) {
    const int64_t hd = rows / heads, half = hd / 2;
    std::vector<int> src(rows);
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t s = 0; s < 2; ++s)
        for (int64_t i = 0; i < half; ++i) src[h * hd + s * half + i] = int(h * hd + 2 * i + s);
    return src;
  }

 private:
  static io::st_dtype dtype(const gguf_tensor& t) {
    return t.type == kF32 ? io::st_dtype::F32 : t.type == kF16 ? io::st_dtype::F16 : io::st_dtype::BF16;
  }
  const gguf_file& f_;
  std::set<std::string> read_;
};

config read_config(const gguf_file& f, const meta& m, const std::string& arch, tensor_reader& tr) {
  config c;
  c.family = arch;
  const std::string a = arch + ".";
  c.n_layers = int(m.integer(a + "block_count", 1, kMaxDim));
  // Each layer has tensors of its own (blk.L.*): a count above the file's tensors is refused
  // before anything is sized by it (a block_count of 2^31 - 1 asked for 8 GiB of per-layer state).
  if (static_cast<size_t>(c.n_layers) > f.tensors().size())
    fail("{}: metadata {}block_count = {}: the file holds {} tensors (expected one or more per layer)", f.path(), a,
         c.n_layers, f.tensors().size());
  c.dim = int(m.integer(a + "embedding_length", 1, kMaxDim));
  c.hidden_dim = int(m.integer(a + "feed_forward_length", 1, kMaxDim));
  c.n_head = int(m.integer(a + "attention.head_count", 1, kMaxDim));
  c.n_head_kv = int(m.integer_or(a + "attention.head_count_kv", 1, kMaxDim, c.n_head));
  c.seq_len = int(m.integer(a + "context_length", 1, kMaxDim));
  c.d_head = int(m.integer_or(a + "attention.key_length", 1, kMaxDim, c.dim / c.n_head));
  if (m.has(a + "attention.value_length") && m.integer(a + "attention.value_length", 1, kMaxDim) != c.d_head)
    fail("{}: metadata {}attention.value_length differs from the key length {} (not supported)", f.path(), a, c.d_head);
  if (m.has(a + "rope.dimension_count") && m.integer(a + "rope.dimension_count", 1, kMaxDim) != c.d_head)
    fail("{}: metadata {}rope.dimension_count = {}: partial RoPE not supported (expected the head size {})", f.path(),
         a, m.integer(a + "rope.dimension_count", 1, kMaxDim), c.d_head);
  c.norm_eps = float(m.real(a + "attention.layer_norm_rms_epsilon", 0, 1));
  c.rope_theta = m.has(a + "rope.freq_base") ? float(m.real(a + "rope.freq_base", 0, 1e30)) : 10000.0f;
  c.rope = rope_style::rotate_half;  // q/k un-permuted for llama; qwen2/qwen3 are NEOX = rotate-half
  c.qk_norm = arch == "qwen3";
  // Biases: qwen2 always has q/k/v biases; llama/qwen3 converted with attention_bias have q/k/v
  // and o biases, with mlp_bias gate/up/down ones.
  c.qkv_bias = arch == "qwen2" || tr.has("blk.0.attn_q.bias");
  c.o_bias = tr.has("blk.0.attn_output.bias");
  c.mlp_bias = tr.has("blk.0.ffn_gate.bias");
  c.tied_embeddings = !tr.has("output.weight");
  c.sliding_window.assign(c.n_layers, 0);
  // RoPE scaling: none or linear (inv_freq / factor, ggml's freq_scale = 1/factor).
  const std::string type = m.has(a + "rope.scaling.type") ? m.string(a + "rope.scaling.type") : "none";
  if (type != "none" && type != "linear")
    fail("{}: metadata {}rope.scaling.type '{}' not supported (expected none or linear)", f.path(), a, type);
  double factor = 1.0;
  if (m.has(a + "rope.scaling.factor")) {
    factor = m.real(a + "rope.scaling.factor", 0, 1e9);
    if (type == "none" && factor != 1.0)
      fail("{}: metadata {}rope.scaling.factor = {} with rope.scaling.type none", f.path(), a, factor);
  }
  if (m.has(a + "rope.scaling.original_context_length"))
    m.integer(a + "rope.scaling.original_context_length", 1, kMaxDim);  // used by yarn only
  if (type == "linear" || tr.has("rope_freqs.weight")) {
    // llama.cpp's rope_freqs.weight holds per-pair frequency factors: theta_j / factor_j
    // (ggml_rope_ext freq_factors), as convert_hf_to_gguf.py writes for llama3 rope_scaling.
    std::vector<float> ff(c.d_head / 2, 1.0f);
    if (tr.has("rope_freqs.weight")) ff = tr.vec("rope_freqs.weight", c.d_head / 2);
    for (int j = 0; j < c.d_head / 2; ++j) {
      if (!(ff[j] > 0 && std::isfinite(ff[j])))
        fail("{}: tensor rope_freqs.weight[{}] = {}: expected a positive factor", f.path(), j, ff[j]);
      c.inv_freq.push_back(float(1.0 / std::pow(double(c.rope_theta), double(2 * j) / c.d_head) / factor / ff[j]));
    }
  }
  return c;
}

// A SentencePiece vocabulary (tokenizer.ggml.model "llama"), read as llama.cpp's llama_vocab::load
// does (ggml-org/llama.cpp@c392e5094 src/llama-vocab.cpp, "V" below), and refused by key where
// llama.cpp would read past an array, assert or give ids that depend on unchecked data.
std::unique_ptr<tokenizer> load_spm_tokenizer(const meta& m, const std::string& source) {
  const std::string& path = m.path();
  spm_vocab v;
  const gguf_array& tokens = m.array("tokenizer.ggml.tokens", 8);
  if (tokens.count < 1 || tokens.count > uint64_t(1) << 24)
    fail("{}: tokenizer.ggml.tokens holds {} tokens (expected 1 to 2^24)", path, tokens.count);
  const size_t n = tokens.strings.size();
  // V:1633-1637: scores (float32), one per token. llama.cpp reads them without a length check and
  // takes 0 for every token when the key is absent; an SPM vocabulary without scores merges in
  // text order, not as SentencePiece does, so it is refused here.
  if (!m.has("tokenizer.ggml.scores"))
    fail("{}: missing metadata key tokenizer.ggml.scores (an SPM vocabulary merges by score)", path);
  const gguf_array& scores = m.array("tokenizer.ggml.scores", 6);
  if (scores.count != tokens.count)
    fail("{}: tokenizer.ggml.scores has {} entries for {} tokens", path, scores.count, tokens.count);
  // V:1639-1643: token types (int32), one per token; absent: every token normal.
  const gguf_array* types = m.has("tokenizer.ggml.token_type") ? &m.array("tokenizer.ggml.token_type", 5) : nullptr;
  if (types && types->count != tokens.count)
    fail("{}: tokenizer.ggml.token_type has {} entries for {} tokens", path, types->count, tokens.count);
  // V:1624: tokenizer.ggml.add_space_prefix, true by default for SPM (V:1600).
  v.add_space_prefix = !m.has("tokenizer.ggml.add_space_prefix") || m.boolean("tokenizer.ggml.add_space_prefix");
  // V:2026-2038: llama.cpp gives Phi-3 vocabularies (by general.name) rstrip attributes that
  // change how user-defined tokens split the text; not implemented.
  if (m.has("general.name")) {
    std::string name = m.string("general.name");
    std::transform(name.begin(), name.end(), name.begin(), [](char ch) { return char(std::tolower(uint8_t(ch))); });
    if (name.find("phi-3") != std::string::npos || name.find("phi3") != std::string::npos)
      fail("{}: metadata general.name '{}': Phi-3 SPM vocabularies (rstrip special tokens) not supported", path,
           m.string("general.name"));
  }
  std::map<std::string, size_t> seen;
  for (size_t i = 0; i < n; ++i) {
    std::string word = tokens.strings[i];
    if (word.empty()) word = fmt::format("[EMPTY_{}]", i);  // V:1650-1653
    // V:1655, 1676: token_to_id[word] = i, then GGML_ASSERT that no text repeats.
    if (auto [it, fresh] = seen.emplace(word, i); !fresh)
      fail("{}: tokenizer.ggml.tokens[{}] repeats token {}", path, i, it->second);
    const float score = float(scores.reals[i]);
    if (std::isnan(score)) fail("{}: tokenizer.ggml.scores[{}] is NaN", path, i);
    const int64_t type = types ? types->ints[i] : 1;
    if (type < 0 || type > 6)
      fail("{}: tokenizer.ggml.token_type[{}] = {} (expected 0..6, llama_token_type)", path, i, type);
    // V:2100 token_to_byte reads a byte token's value from its text "<0xXX>".
    if (type == 6 && !(word.size() == 6 && word.starts_with("<0x") && word[5] == '>' &&
                       std::isxdigit(uint8_t(word[3])) && std::isxdigit(uint8_t(word[4]))))
      fail("{}: tokenizer.ggml.token_type[{}] = 6 (byte) but tokenizer.ggml.tokens[{}] is not <0xXX>", path, i, i);
    v.tokens.push_back(std::move(word));
    v.scores.push_back(score);
    v.types.push_back(int(type));
  }
  return make_spm_tokenizer(std::move(v), path + ": tokenizer.ggml", source);
}

}  // namespace

bool is_gguf_file(const std::string& path) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) return false;
  std::ifstream in(path, std::ios::binary);
  char magic[4] = {};
  return in.read(magic, 4) && std::memcmp(magic, "GGUF", 4) == 0;
}

weights load_gguf(const std::string& path) {
  const gguf_file f(path);
  const meta m(f);
  const std::string arch = architecture(f, m);
  refuse_unknown_keys(f, arch);
  tensor_reader tr(f);
  weights w;
  w.cfg = read_config(f, m, arch, tr);
  config& c = w.cfg;
  const auto& embd = f.tensors().find("token_embd.weight");
  if (embd == f.tensors().end()) fail("{}: missing tensor token_embd.weight", path);
  if (embd->second.ne.size() != 2 || embd->second.ne[0] != c.dim)
    fail("{}: tensor token_embd.weight has ne [{}], expected [{}, vocab]", path, fmt::join(embd->second.ne, ", "),
         c.dim);
  c.vocab_size = int(embd->second.ne[1]);
  if (m.has(arch + ".vocab_size") && m.integer(arch + ".vocab_size", 1, kMaxDim) != c.vocab_size)
    fail("{}: metadata {}.vocab_size differs from token_embd.weight's {} rows", path, arch, c.vocab_size);
  // BOS: tokenizer.ggml.add_bos_token when set; otherwise llama prepends it and qwen does not
  // (as the Hugging Face families do), and an SPM vocabulary does (llama.cpp's default for SPM,
  // ggml-org/llama.cpp@c392e5094 src/llama-vocab.cpp:1598-1602, with BOS id 1 when the file names
  // none, :1372-1377).
  const bool spm = m.has("tokenizer.ggml.model") && m.string("tokenizer.ggml.model") == "llama";
  const bool add_bos =
      m.has("tokenizer.ggml.add_bos_token") ? m.boolean("tokenizer.ggml.add_bos_token") : arch == "llama" || spm;
  c.bos_id = -1;
  if (add_bos)
    c.bos_id = spm && !m.has("tokenizer.ggml.bos_token_id")
                   ? 1
                   : int(m.integer("tokenizer.ggml.bos_token_id", 0, c.vocab_size - 1));
  validate(c, path);
  const int64_t D = c.dim, H = c.hidden_dim, V = c.vocab_size, hd = int64_t(c.n_head) * c.d_head,
                kv = int64_t(c.n_head_kv) * c.d_head;
  const bool permuted = arch == "llama";  // NORM RoPE in llama.cpp; qwen2/qwen3 use NEOX
  const int qh = permuted ? c.n_head : 0, kh = permuted ? c.n_head_kv : 0;
  w.tok_embeddings = tr.mat("token_embd.weight", V, D);
  for (int l = 0; l < c.n_layers; ++l) {
    const std::string p = fmt::format("blk.{}.", l);
    layer_weights L;
    L.attn_norm = tr.vec(p + "attn_norm.weight", D);
    L.wq = tr.mat(p + "attn_q.weight", hd, D, qh);
    L.wk = tr.mat(p + "attn_k.weight", kv, D, kh);
    L.wv = tr.mat(p + "attn_v.weight", kv, D);
    if (c.qkv_bias) {
      L.bq = permuted ? tr.permuted_vec(p + "attn_q.bias", hd, qh) : tr.vec(p + "attn_q.bias", hd);
      L.bk = permuted ? tr.permuted_vec(p + "attn_k.bias", kv, kh) : tr.vec(p + "attn_k.bias", kv);
      L.bv = tr.vec(p + "attn_v.bias", kv);
    }
    if (c.qk_norm) {
      L.q_norm = tr.vec(p + "attn_q_norm.weight", c.d_head);
      L.k_norm = tr.vec(p + "attn_k_norm.weight", c.d_head);
    }
    L.wo = tr.mat(p + "attn_output.weight", D, hd);
    if (c.o_bias) L.bo = tr.vec(p + "attn_output.bias", D);
    L.ffn_norm = tr.vec(p + "ffn_norm.weight", D);
    L.w1 = tr.mat(p + "ffn_gate.weight", H, D);
    L.w3 = tr.mat(p + "ffn_up.weight", H, D);
    L.w2 = tr.mat(p + "ffn_down.weight", D, H);
    if (c.mlp_bias) {
      L.b1 = tr.vec(p + "ffn_gate.bias", H);
      L.b3 = tr.vec(p + "ffn_up.bias", H);
      L.b2 = tr.vec(p + "ffn_down.bias", D);
    }
    w.layers.push_back(std::move(L));
  }
  w.final_norm = tr.vec("output_norm.weight", D);
  if (!c.tied_embeddings) w.classifier = tr.mat("output.weight", V, D);
  tr.check_all_read(arch);
  w.id = fs::path(path).stem().string();
  // Provenance: hash of the header, metadata and tensor infos (hashing the weights is too slow).
  w.source_hash = fnv1a_hex(f.file()->data(), f.header_bytes());
  return w;
}

std::unique_ptr<tokenizer> load_gguf_tokenizer(const std::string& path) {
  const gguf_file f(path);
  const meta m(f);
  const std::string model = m.string("tokenizer.ggml.model");
  const std::string text(reinterpret_cast<const char*>(f.file()->data()), f.header_bytes());
  const std::string source =
      fmt::format("{}:{}", fs::path(path).filename().string(), fnv1a_hex(text.data(), text.size()));
  if (model == "llama") return load_spm_tokenizer(m, source);
  if (model != "gpt2")
    fail(
        "{}: tokenizer.ggml.model '{}' not supported (expected gpt2, byte-level BPE, or llama, SentencePiece; "
        "pass --tokenizer tokenizer.json)",
        path, model);
  if (m.has("tokenizer.ggml.add_space_prefix") && m.boolean("tokenizer.ggml.add_space_prefix"))
    fail("{}: metadata tokenizer.ggml.add_space_prefix = true not supported", path);
  const gguf_array& tokens = m.array("tokenizer.ggml.tokens", 8);
  if (tokens.count > uint64_t(1) << 24)
    fail("{}: tokenizer.ggml.tokens holds {} tokens (too many)", path, tokens.count);
  const gguf_array* types = m.has("tokenizer.ggml.token_type") ? &m.array("tokenizer.ggml.token_type", 5) : nullptr;
  if (types && types->count != tokens.count)
    fail("{}: tokenizer.ggml.token_type has {} entries for {} tokens", path, types->count, tokens.count);
  bpe_vocab v;
  v.pre = m.has("tokenizer.ggml.pre") ? m.string("tokenizer.ggml.pre") : "default";
  std::map<std::string, size_t> seen;
  // llama_token_type (llama.cpp include/llama.h): 1 normal, 2 unknown, 3 control, 4 user defined,
  // 5 unused, 6 byte. Control and user-defined tokens are the tokenizer.json's added tokens.
  for (size_t i = 0; i < tokens.strings.size(); ++i) {
    const int64_t type = types ? types->ints[i] : 1;
    const std::string& s = tokens.strings[i];
    if (type == 5) continue;
    if (type < 1 || type > 4)
      fail("{}: tokenizer.ggml.token_type[{}] = {} not supported for a gpt2 tokenizer (expected 1..5)", path, i, type);
    if (auto [it, fresh] = seen.emplace(s, i); !fresh)
      fail("{}: tokenizer.ggml.tokens[{}] repeats token {}", path, i, it->second);
    (type == 3 || type == 4 ? v.added : v.tokens).emplace_back(s, int(i));
  }
  if (m.has("tokenizer.ggml.merges")) {
    const gguf_array& merges = m.array("tokenizer.ggml.merges", 8);
    v.merges = merges.strings;
  }
  return make_bpe_tokenizer(v, path + ": tokenizer.ggml", source);
}

}  // namespace attnum::model
