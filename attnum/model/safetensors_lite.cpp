#include "attnum/model/safetensors_lite.h"

#include <bit>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "attnum/core/error.h"
#include "attnum/formats/format.h"

namespace attnum::model {
namespace {
size_t dtype_size(const std::string& d) {
  if (d == "F64" || d == "I64" || d == "U64") return 8;
  if (d == "F32" || d == "I32" || d == "U32") return 4;
  if (d == "F16" || d == "BF16" || d == "I16" || d == "U16") return 2;
  if (d == "I8" || d == "U8" || d == "BOOL" || d == "F8_E4M3" || d == "F8_E5M2") return 1;
  return 0;
}
}  // namespace

size_t st_tensor::numel() const {
  size_t n = 1;
  for (int64_t s : shape) n *= size_t(s);
  return n;
}

float half_to_float(uint16_t h) {
  const uint32_t sign = uint32_t(h >> 15) << 31, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  if (exp == 0) return std::bit_cast<float>(sign) + (sign ? -1.0f : 1.0f) * std::ldexp(float(mant), -24);
  if (exp == 31) return std::bit_cast<float>(sign | 0x7f800000u | (mant << 13));
  return std::bit_cast<float>(sign | ((exp + 112) << 23) | (mant << 13));  // 112 = 127 - 15
}

st_reader::st_reader(const std::string& path) : file_(std::make_unique<mapped_file>(path)) {
  const size_t size = file_->size();
  if (size < 8) fail("{}: truncated: {} bytes, a safetensors file starts with an 8-byte header length", path, size);
  uint64_t n;
  std::memcpy(&n, file_->data(), 8);
  if (n > size - 8 || n > (100u << 20))
    fail("{}: header length {} exceeds the file ({} bytes) or 100 MiB: truncated or not safetensors", path, n, size);
  nlohmann::json h;
  try {
    h = nlohmann::json::parse(file_->data() + 8, file_->data() + 8 + n);
  } catch (const nlohmann::json::exception& e) {
    fail("{}: header is not valid JSON: {}", path, e.what());
  }
  if (!h.is_object()) fail("{}: header is not a JSON object", path);
  const size_t body = size - 8 - n;
  const unsigned char* base = file_->data() + 8 + n;
  for (auto it = h.begin(); it != h.end(); ++it) {
    if (it.key() == "__metadata__") {
      if (!it->is_object()) fail("{}: __metadata__ is not an object", path);
      for (auto m = it->begin(); m != it->end(); ++m)
        metadata_[m.key()] = m->is_string() ? m->get<std::string>() : m->dump();
      continue;
    }
    const auto& e = *it;
    st_tensor t;
    t.name = it.key();
    if (!e.is_object() || !e.contains("dtype") || !e.contains("shape") || !e.contains("data_offsets") ||
        !e["dtype"].is_string() || !e["shape"].is_array() || !e["data_offsets"].is_array() ||
        e["data_offsets"].size() != 2)
      fail("{}: tensor {}: expected {{dtype, shape, data_offsets: [begin, end]}}", path, t.name);
    t.dtype = e["dtype"].get<std::string>();
    const size_t es = dtype_size(t.dtype);
    if (es == 0) fail("{}: tensor {}: unknown dtype {}", path, t.name, t.dtype);
    size_t numel = 1;
    for (const auto& s : e["shape"]) {
      if (!s.is_number_integer() || s.get<int64_t>() < 0)
        fail("{}: tensor {}: shape entries must be non-negative integers", path, t.name);
      t.shape.push_back(s.get<int64_t>());
      numel *= size_t(t.shape.back());
    }
    const auto& off = e["data_offsets"];
    if (!off[0].is_number_unsigned() || !off[1].is_number_unsigned())
      fail("{}: tensor {}: data_offsets must be non-negative integers", path, t.name);
    const uint64_t b = off[0].get<uint64_t>(), end = off[1].get<uint64_t>();
    if (b > end || end > body)
      fail("{}: tensor {}: data_offsets [{}, {}] outside the {}-byte data section (truncated file?)",
           path, t.name, b, end, body);
    if (end - b != numel * es)
      fail("{}: tensor {}: shape and dtype {} need {} bytes, data_offsets give {}", path, t.name,
           t.dtype, numel * es, end - b);
    t.data = base + b;
    t.nbytes = end - b;
    tensors_.emplace(t.name, std::move(t));
  }
}

const st_tensor* st_reader::find(const std::string& name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

std::vector<float> st_reader::to_float(const st_tensor& t) const {
  const size_t n = t.numel();
  std::vector<float> v(n);
  if (t.dtype == "F32") {
    std::memcpy(v.data(), t.data, n * 4);
  } else if (t.dtype == "BF16" || t.dtype == "F16") {
    const bool bf = t.dtype == "BF16";
    for (size_t i = 0; i < n; ++i) {
      uint16_t u;
      std::memcpy(&u, t.data + 2 * i, 2);
      v[i] = bf ? std::bit_cast<float>(uint32_t(u) << 16) : half_to_float(u);
    }
  } else {
    fail("{}: tensor {}: dtype {} not supported (expected F32, F16 or BF16)", path(), t.name, t.dtype);
  }
  return v;
}

void st_write(const std::string& path, const std::vector<st_out>& tensors,
              const std::map<std::string, std::string>& metadata) {
  nlohmann::json h = nlohmann::json::object();
  if (!metadata.empty()) h["__metadata__"] = metadata;
  std::vector<std::string> blobs;
  size_t offset = 0;
  for (const st_out& t : tensors) {
    size_t n = 1;
    for (int64_t s : t.shape) n *= size_t(s);
    std::string blob;
    if (t.dtype == "F32") {
      blob.assign(reinterpret_cast<const char*>(t.data), n * 4);
    } else if (t.dtype == "BF16") {
      blob.resize(n * 2);
      for (size_t i = 0; i < n; ++i) {
        const uint16_t u = uint16_t(std::bit_cast<uint32_t>(formats::quantize_bf16(t.data[i])) >> 16);
        std::memcpy(blob.data() + 2 * i, &u, 2);
      }
    } else {
      fail("{}: cannot write dtype {} (tensor {})", path, t.dtype, t.name);
    }
    h[t.name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {offset, offset + blob.size()}}};
    offset += blob.size();
    blobs.push_back(std::move(blob));
  }
  std::string header = h.dump();
  header.append((8 - header.size() % 8) % 8, ' ');  // align the data section to 8 bytes
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary);
    const uint64_t n = header.size();
    f.write(reinterpret_cast<const char*>(&n), 8);
    f << header;
    for (const auto& b : blobs) f << b;
    if (!f) fail("{}: write failed", tmp);
  }
  std::filesystem::rename(tmp, path);
}

}  // namespace attnum::model
