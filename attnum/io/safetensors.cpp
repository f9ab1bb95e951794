// safetensors reader (mmap + validation) and atomic writer (see safetensors.h).
#include "attnum/io/safetensors.h"

#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <cstring>
#include <set>

#include "attnum/core/error.h"
#include "attnum/core/file.h"
#include "attnum/core/suggest.h"
#include "attnum/formats/format.h"
#include "attnum/io/json_file.h"

namespace attnum::io {
namespace {

using nlohmann::json;

constexpr std::array<std::pair<std::string_view, st_dtype>, 8> kDtypes = {{
    {"F32", st_dtype::F32},
    {"F16", st_dtype::F16},
    {"BF16", st_dtype::BF16},
    {"F64", st_dtype::F64},
    {"I32", st_dtype::I32},
    {"I64", st_dtype::I64},
    {"U8", st_dtype::U8},
    {"I8", st_dtype::I8},
}};

// A header larger than this is not a safetensors file (the Rust reader's limit is 100 MB).
constexpr uint64_t kMaxHeader = 100ull << 20;

uint64_t read_u64_le(const uint8_t* p) {
  uint64_t v = 0;
  for (int k = 7; k >= 0; --k) v = (v << 8) | p[k];
  return v;
}

// float32 value of every fp16 code, built once (exact: decode is exact).
const std::vector<float>& half_table() {
  static const std::vector<float> t = [] {
    std::vector<float> v(65536);
    for (uint32_t c = 0; c < 65536; ++c) v[c] = static_cast<float>(formats::decode(formats::format::fp16, c));
    return v;
  }();
  return t;
}

// bfloat16 bits as float32 (exact: the upper half of the float32 encoding).
float bf16_value(uint16_t bits) { return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16); }

template <typename T>
T load(const uint8_t* p, int64_t i) {
  T v;
  std::memcpy(&v, p + static_cast<size_t>(i) * sizeof(T), sizeof(T));
  return v;
}

template <typename Out>
void convert(const tensor_view& t, Out* out) {
  const int64_t n = t.numel();
  const uint8_t* p = t.data;
  switch (t.dtype) {
    case st_dtype::F32:
      for (int64_t i = 0; i < n; ++i) out[i] = static_cast<Out>(load<float>(p, i));
      break;
    case st_dtype::F64:
      for (int64_t i = 0; i < n; ++i) out[i] = static_cast<Out>(load<double>(p, i));
      break;
    case st_dtype::F16: {
      const auto& tab = half_table();
      for (int64_t i = 0; i < n; ++i) out[i] = static_cast<Out>(tab[load<uint16_t>(p, i)]);
      break;
    }
    case st_dtype::BF16:
      for (int64_t i = 0; i < n; ++i) out[i] = static_cast<Out>(bf16_value(load<uint16_t>(p, i)));
      break;
    case st_dtype::I32:
      for (int64_t i = 0; i < n; ++i) out[i] = static_cast<Out>(load<int32_t>(p, i));
      break;
    case st_dtype::I64:
      for (int64_t i = 0; i < n; ++i) out[i] = static_cast<Out>(load<int64_t>(p, i));
      break;
    case st_dtype::U8:
      for (int64_t i = 0; i < n; ++i) out[i] = static_cast<Out>(p[i]);
      break;
    case st_dtype::I8:
      for (int64_t i = 0; i < n; ++i) out[i] = static_cast<Out>(static_cast<int8_t>(p[i]));
      break;
  }
}

uint64_t json_uint(const std::string& path, const std::string& name, const char* field, const json& v) {
  if (v.is_number_unsigned()) return v.get<uint64_t>();
  if (v.is_number_integer() && v.get<int64_t>() >= 0) return static_cast<uint64_t>(v.get<int64_t>());
  fail("{}: tensor '{}': {} must hold non-negative integers, got {}", path, clip(name), field, json_brief(v));
}

tensor_view parse_entry(const std::string& path, const std::string& name, const json& e) {
  if (!e.is_object()) fail("{}: tensor '{}': expected an object with dtype, shape, data_offsets", path, clip(name));
  tensor_view t;
  t.name = name;
  const auto dt = e.find("dtype");
  if (dt == e.end() || !dt->is_string()) fail("{}: tensor '{}': missing string field dtype", path, clip(name));
  const std::string dname = dt->get<std::string>();
  bool known = false;
  for (const auto& [n, d] : kDtypes)
    if (n == dname) t.dtype = d, known = true;
  if (!known)
    fail("{}: tensor '{}': dtype '{}': expected one of F32 F16 BF16 F64 I32 I64 U8 I8", path, clip(name), clip(dname));
  const auto sh = e.find("shape");
  if (sh == e.end() || !sh->is_array()) fail("{}: tensor '{}': missing array field shape", path, clip(name));
  uint64_t numel = 1;
  for (const json& d : *sh) {
    const uint64_t v = json_uint(path, name, "shape", d);
    if (v > (uint64_t{1} << 50)) fail("{}: tensor '{}': shape dimension {} is larger than 2^50", path, clip(name), v);
    if (v != 0 && numel > (uint64_t{1} << 50) / v) fail("{}: tensor '{}': shape too large", path, clip(name));
    numel *= v;
    t.shape.push_back(static_cast<int64_t>(v));
  }
  const auto off = e.find("data_offsets");
  if (off == e.end() || !off->is_array() || off->size() != 2)
    fail("{}: tensor '{}': data_offsets must be [begin, end]", path, clip(name));
  const uint64_t begin = json_uint(path, name, "data_offsets", (*off)[0]);
  const uint64_t end = json_uint(path, name, "data_offsets", (*off)[1]);
  if (end < begin) fail("{}: tensor '{}': data_offsets [{}, {}] end before begin", path, clip(name), begin, end);
  const uint64_t want = numel * dtype_size(t.dtype);
  if (end - begin != want)
    fail("{}: tensor '{}': data_offsets [{}, {}] hold {} bytes, shape x {} needs {}", path, clip(name), begin, end,
         end - begin, dname, want);
  t.nbytes = static_cast<size_t>(want);
  // Offsets are kept in data until the buffer base is known.
  t.data = reinterpret_cast<const uint8_t*>(static_cast<uintptr_t>(begin));
  return t;
}

}  // namespace

std::string_view dtype_name(st_dtype d) { return kDtypes[static_cast<size_t>(d)].first; }

size_t dtype_size(st_dtype d) {
  switch (d) {
    case st_dtype::F64:
    case st_dtype::I64:
      return 8;
    case st_dtype::F32:
    case st_dtype::I32:
      return 4;
    case st_dtype::F16:
    case st_dtype::BF16:
      return 2;
    case st_dtype::U8:
    case st_dtype::I8:
      return 1;
  }
  return 1;
}

int64_t tensor_view::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::vector<float> tensor_view::to_float() const {
  check_alloc(checked_mul(static_cast<uint64_t>(numel()), sizeof(float)), fmt::format("tensor '{}'", name));
  std::vector<float> out(static_cast<size_t>(numel()));
  convert(*this, out.data());
  return out;
}

void tensor_view::to_float(float* out) const { convert(*this, out); }

void widen_to_float(st_dtype dtype, const uint8_t* data, size_t begin, size_t count, float* out) {
  switch (dtype) {
    case st_dtype::F32:
      std::memcpy(out, data + begin * sizeof(float), count * sizeof(float));
      return;
    case st_dtype::BF16:
      for (size_t i = 0; i < count; ++i) out[i] = bf16_value(load<uint16_t>(data, int64_t(begin + i)));
      return;
    case st_dtype::F16: {
      const auto& tab = half_table();
      for (size_t i = 0; i < count; ++i) out[i] = tab[load<uint16_t>(data, int64_t(begin + i))];
      return;
    }
    default:
      fail("widen_to_float: dtype {} is not a weight dtype (expected F32, F16 or BF16)", dtype_name(dtype));
  }
}

std::vector<double> tensor_view::to_double() const {
  check_alloc(checked_mul(static_cast<uint64_t>(numel()), sizeof(double)), fmt::format("tensor '{}'", name));
  std::vector<double> out(static_cast<size_t>(numel()));
  convert(*this, out.data());
  return out;
}

safetensors_file::safetensors_file(const std::string& path) : file_(path) {
  const size_t size = file_.size();
  if (size < 8) fail("{}: truncated: {} bytes, a safetensors file starts with an 8-byte header length", path, size);
  const uint64_t n = read_u64_le(file_.data());
  if (n > kMaxHeader || n > size - 8)
    fail("{}: header length {} exceeds the file ({} bytes): truncated or not safetensors", path, n, size);
  json header;
  try {
    header = json::parse(file_.data() + 8, file_.data() + 8 + n);
  } catch (const json::exception& e) {
    fail("{}: header is not valid JSON: {}", path, e.what());
  }
  if (!header.is_object()) fail("{}: header must be a JSON object", path);
  const uint8_t* base = file_.data() + 8 + n;
  const uint64_t buffer = size - 8 - n;
  std::vector<tensor_view> views;
  for (const auto& [key, value] : header.items()) {
    if (key == "__metadata__") {
      if (!value.is_object()) fail("{}: __metadata__ must be an object of strings", path);
      for (const auto& [mk, mv] : value.items()) {
        if (!mv.is_string()) fail("{}: __metadata__ '{}' must be a string, got {}", path, clip(mk), json_brief(mv));
        metadata_[mk] = mv.get<std::string>();
      }
      continue;
    }
    views.push_back(parse_entry(path, key, value));
  }
  // Contiguous, non-overlapping and covering the buffer: sorted by begin, each begins where the
  // previous one ends, the last ends at the end of the file.
  const auto begin_of = [](const tensor_view& t) { return reinterpret_cast<uintptr_t>(t.data); };
  std::sort(views.begin(), views.end(), [&](const tensor_view& a, const tensor_view& b) {
    return begin_of(a) != begin_of(b) ? begin_of(a) < begin_of(b) : a.nbytes < b.nbytes;
  });
  uint64_t at = 0;
  for (tensor_view& t : views) {
    const uint64_t b = begin_of(t);
    if (b != at)
      fail("{}: tensor '{}' begins at byte {} of the data buffer, expected {} ({})", path, clip(t.name), b, at,
           b < at ? "overlaps the previous tensor" : "gap before it");
    if (b + t.nbytes > buffer)
      fail("{}: tensor '{}': data_offsets end {} outside the data buffer ({} bytes): truncated file", path,
           clip(t.name), b + t.nbytes, buffer);
    at = b + t.nbytes;
    t.data = base + b;
  }
  if (at != buffer)
    fail("{}: {} bytes after the last tensor: the header does not describe the file", path, buffer - at);
  for (tensor_view& t : views) tensors_.emplace(t.name, std::move(t));
}

const tensor_view* safetensors_file::find(std::string_view name) const {
  const auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

const tensor_view& safetensors_file::at(std::string_view name) const {
  const tensor_view* t = find(name);
  if (!t) {
    std::vector<std::string> names;
    for (const auto& [n, _] : tensors_) names.push_back(n);
    const std::string hint = did_you_mean(name, names);
    fail("{}: no tensor '{}'{} ({} tensors in the file{})", path(), clip(name), hint.empty() ? "" : ": " + hint,
         tensors_.size(), tensors_.size() <= 12 ? ": " + fmt::format("{}", fmt::join(names, ", ")) : "");
  }
  return *t;
}

std::pair<std::string, std::string> split_tensor_path(const std::string& path) {
  static constexpr std::string_view kExt = ".safetensors:";
  const size_t pos = path.rfind(kExt);
  if (pos == std::string::npos) return {path, {}};
  std::string tensor = path.substr(pos + kExt.size());
  if (tensor.empty()) fail("{}: expected FILE.safetensors:TENSOR, no tensor name after the ':'", path);
  return {path.substr(0, pos + kExt.size() - 1), tensor};
}

namespace {
uint64_t layout_bytes(const std::string& path, const tensor_layout& t) {
  uint64_t n = 1;
  for (int64_t d : t.shape) {
    if (d < 0) fail("{}: tensor '{}': negative dimension {}", path, clip(t.name), d);
    n = checked_mul(n, static_cast<uint64_t>(d));
  }
  return checked_mul(n, dtype_size(t.dtype));
}
}  // namespace

safetensors_writer::safetensors_writer(const std::string& path, std::vector<tensor_layout> layout,
                                       const std::map<std::string, std::string>& metadata)
    : path_(path), layout_(std::move(layout)) {
  json header = json::object();
  std::set<std::string> names;
  uint64_t at = 0;
  for (const tensor_layout& t : layout_) {
    if (t.name.empty() || t.name == "__metadata__") fail("{}: bad tensor name '{}'", path, clip(t.name));
    if (!names.insert(t.name).second) fail("{}: tensor '{}' given twice", path, clip(t.name));
    const uint64_t bytes = layout_bytes(path, t);
    header[t.name] = {{"dtype", dtype_name(t.dtype)}, {"shape", t.shape}, {"data_offsets", {at, at + bytes}}};
    at += bytes;
  }
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::string h = header.dump();
  h.append((8 - h.size() % 8) % 8, ' ');  // align the data buffer to 8 bytes, as the Rust writer does
  std::array<uint8_t, 8> len{};
  for (int k = 0; k < 8; ++k) len[k] = static_cast<uint8_t>(static_cast<uint64_t>(h.size()) >> (8 * k));
  out_ = std::make_unique<atomic_file_writer>(path);
  out_->write(len.data(), len.size());
  out_->write(h.data(), h.size());
}

void safetensors_writer::write_next(const void* bytes, size_t n) {
  if (next_ >= layout_.size()) fail("{}: all {} tensors are already written", path_, layout_.size());
  const tensor_layout& t = layout_[next_];
  if (n != layout_bytes(path_, t))
    fail("{}: tensor '{}': {} bytes given, its shape needs {}", path_, clip(t.name), n, layout_bytes(path_, t));
  out_->write(bytes, n);
  ++next_;
}

void safetensors_writer::commit() {
  if (next_ != layout_.size())
    fail("{}: {} of {} tensors written (next: '{}')", path_, next_, layout_.size(), clip(layout_[next_].name));
  out_->commit();
}

void write_safetensors(const std::string& path, const std::vector<tensor_out>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  std::vector<tensor_layout> layout;
  for (const tensor_out& t : tensors) {
    if (t.dtype != st_dtype::F32 && t.dtype != st_dtype::F16 && t.dtype != st_dtype::BF16 && t.dtype != st_dtype::F64)
      fail("{}: tensor '{}': cannot write float data as {}: expected F32, F16, BF16 or F64", path, clip(t.name),
           dtype_name(t.dtype));
    layout.push_back({t.name, t.dtype, t.shape});
    if (layout_bytes(path, layout.back()) > 0 && !t.data) fail("{}: tensor '{}': no data", path, clip(t.name));
  }
  safetensors_writer out(path, std::move(layout), metadata);
  std::vector<uint8_t> buf;
  for (const tensor_out& t : tensors) {
    int64_t n = 1;
    for (int64_t d : t.shape) n *= d;
    buf.resize(static_cast<size_t>(n) * dtype_size(t.dtype));
    uint8_t* dst = buf.data();
    for (int64_t i = 0; i < n; ++i) {
      const float x = t.data[i];
      switch (t.dtype) {
        case st_dtype::F32:
          std::memcpy(dst, &x, 4);
          dst += 4;
          break;
        case st_dtype::F64: {
          const double v = x;
          std::memcpy(dst, &v, 8);
          dst += 8;
          break;
        }
        default: {
          // BF16: quantize_bf16 is RNE with overflow to Inf (tested equal to encode); NaN -> 0x7fff.
          const auto c = t.dtype == st_dtype::BF16 && !std::isnan(x)
                             ? static_cast<uint16_t>(std::bit_cast<uint32_t>(formats::quantize_bf16(x)) >> 16)
                             : static_cast<uint16_t>(formats::encode(
                                   t.dtype == st_dtype::BF16 ? formats::format::bf16 : formats::format::fp16, x,
                                   formats::rounding::nearest_even, false));
          std::memcpy(dst, &c, 2);
          dst += 2;
        }
      }
    }
    out.write_next(buf.data(), buf.size());
  }
  out.commit();
}

}  // namespace attnum::io
