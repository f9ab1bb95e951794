// NumPy .npy reader/writer (see npy.h for the subset supported).
#include "attnum/io/npy.h"

#include <cctype>
#include <cstring>

#include "attnum/core/error.h"
#include "attnum/core/file.h"
#include "attnum/formats/format.h"
#include "attnum/io/mapped_file.h"

namespace attnum::io {
namespace {

constexpr char kMagic[] = "\x93NUMPY";

size_t elem_size(npy_dtype d) { return d == npy_dtype::f64 ? 8 : d == npy_dtype::f32 ? 4 : 2; }

// The header is a Python dict literal: {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }
struct header_parser {
  const std::string& path;
  std::string_view s;
  size_t i = 0;

  void skip_ws() {
    while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
  }
  [[noreturn]] void bad(std::string_view what) const {
    fail("{}: npy header: expected {} at offset {} in \"{}\"", path, what, i, s);
  }
  void expect(char c) {
    skip_ws();
    if (i >= s.size() || s[i] != c) bad(std::string("'") + c + "'");
    ++i;
  }
  bool peek(char c) {
    skip_ws();
    return i < s.size() && s[i] == c;
  }
  std::string quoted() {
    skip_ws();
    if (i >= s.size() || (s[i] != '\'' && s[i] != '"')) bad("a quoted string");
    const char q = s[i++];
    const size_t end = s.find(q, i);
    if (end == std::string_view::npos) bad("a closing quote");
    std::string out(s.substr(i, end - i));
    i = end + 1;
    return out;
  }
  bool boolean() {
    skip_ws();
    if (s.substr(i, 4) == "True") return i += 4, true;
    if (s.substr(i, 5) == "False") return i += 5, false;
    bad("True or False");
  }
  std::vector<int64_t> tuple() {
    expect('(');
    std::vector<int64_t> out;
    while (!peek(')')) {
      skip_ws();
      int64_t v = 0;
      const size_t start = i;
      while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) {
        v = v * 10 + (s[i++] - '0');
        if (v > (int64_t{1} << 48)) bad("a dimension below 2^48");
      }
      if (i == start) bad("a non-negative integer dimension");
      out.push_back(v);
      if (!peek(')')) expect(',');
    }
    expect(')');
    return out;
  }
};

struct npy_header {
  npy_dtype dtype;
  std::vector<int64_t> shape;
  size_t data_offset;
};

npy_header parse_header(const mapped_file& f) {
  const std::string& path = f.path();
  const uint8_t* p = f.data();
  if (f.size() < 10 || std::memcmp(p, kMagic, 6) != 0)
    fail("{}: not a .npy file (expected the magic \\x93NUMPY, file has {} bytes)", path, f.size());
  const int major = p[6];
  size_t len = 0, off = 0;
  if (major == 1) {
    len = p[8] | (size_t{p[9]} << 8);
    off = 10;
  } else if (major == 2 || major == 3) {
    if (f.size() < 12) fail("{}: truncated npy header", path);
    len = p[8] | (size_t{p[9]} << 8) | (size_t{p[10]} << 16) | (size_t{p[11]} << 24);
    off = 12;
  } else {
    fail("{}: npy format version {} (expected 1, 2 or 3)", path, major);
  }
  if (off + len > f.size()) fail("{}: truncated: npy header of {} bytes exceeds the file", path, len);
  header_parser hp{path, std::string_view(reinterpret_cast<const char*>(p + off), len)};
  npy_header h{npy_dtype::f32, {}, off + len};
  bool have_descr = false, have_shape = false, have_order = false;
  hp.expect('{');
  while (!hp.peek('}')) {
    const std::string key = hp.quoted();
    hp.expect(':');
    if (key == "descr") {
      const std::string d = hp.quoted();
      if (d == "<f4" || d == "=f4")
        h.dtype = npy_dtype::f32;
      else if (d == "<f8" || d == "=f8")
        h.dtype = npy_dtype::f64;
      else if (d == "<f2" || d == "=f2")
        h.dtype = npy_dtype::f16;
      else
        fail("{}: npy descr '{}': expected little-endian float '<f4', '<f8' or '<f2'", path, clip(d));
      have_descr = true;
    } else if (key == "fortran_order") {
      if (hp.boolean()) fail("{}: npy fortran_order is True: expected C order", path);
      have_order = true;
    } else if (key == "shape") {
      h.shape = hp.tuple();
      have_shape = true;
    } else {
      fail("{}: npy header: unexpected key '{}'", path, clip(key));
    }
    if (!hp.peek('}')) hp.expect(',');
  }
  if (!have_descr || !have_shape || !have_order)
    fail("{}: npy header lacks {}", path, !have_descr ? "descr" : !have_shape ? "shape" : "fortran_order");
  return h;
}

int64_t checked_numel(const std::string& path, const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) fail("{}: negative dimension {}", path, d);
    if (d != 0 && n > (int64_t{1} << 50) / d) fail("{}: shape too large", path);
    n *= d;
  }
  return n;
}

// Maps and validates; returns the header and a pointer to the raw data.
const uint8_t* open_data(const mapped_file& f, npy_header& h, int64_t& n) {
  h = parse_header(f);
  n = checked_numel(f.path(), h.shape);
  const size_t want = static_cast<size_t>(n) * elem_size(h.dtype);
  const size_t have = f.size() - h.data_offset;
  if (have != want)
    fail("{}: npy data is {} bytes, the header (shape and {}) says {}{}", f.path(), have, npy_descr(h.dtype), want,
         have < want ? ": truncated" : "");
  return f.data() + h.data_offset;
}

template <typename Out>
void convert(const uint8_t* src, npy_dtype d, int64_t n, Out* out) {
  for (int64_t i = 0; i < n; ++i) {
    if (d == npy_dtype::f32) {
      float v;
      std::memcpy(&v, src + 4 * i, 4);
      out[i] = static_cast<Out>(v);
    } else if (d == npy_dtype::f64) {
      double v;
      std::memcpy(&v, src + 8 * i, 8);
      out[i] = static_cast<Out>(v);
    } else {
      uint16_t c;
      std::memcpy(&c, src + 2 * i, 2);
      out[i] = static_cast<Out>(formats::decode(formats::format::fp16, c));
    }
  }
}

std::string make_header(npy_dtype d, const std::vector<int64_t>& shape) {
  std::string dict = "{'descr': '" + std::string(npy_descr(d)) + "', 'fortran_order': False, 'shape': (";
  for (size_t k = 0; k < shape.size(); ++k) dict += (k ? ", " : "") + std::to_string(shape[k]);
  dict += shape.size() == 1 ? ",), }" : "), }";
  // Pad with spaces and a final newline so that the data starts at a multiple of 64 bytes.
  size_t total = 10 + dict.size() + 1;
  dict.append((64 - total % 64) % 64, ' ');
  dict += '\n';
  std::string h(kMagic, 6);
  h += '\x01';
  h += '\x00';
  h += static_cast<char>(dict.size() & 0xff);
  h += static_cast<char>(dict.size() >> 8);
  return h + dict;
}

void write_raw(const std::string& path, npy_dtype d, const std::vector<int64_t>& shape, const void* bytes,
               size_t nbytes) {
  std::string out = make_header(d, shape);
  const size_t h = out.size();
  out.resize(h + nbytes);
  if (nbytes) std::memcpy(out.data() + h, bytes, nbytes);
  write_file_atomic(path, out);
}

}  // namespace

std::string_view npy_descr(npy_dtype d) { return d == npy_dtype::f64 ? "<f8" : d == npy_dtype::f32 ? "<f4" : "<f2"; }

int64_t npy_array::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

npy_array read_npy(const std::string& path) {
  mapped_file f(path);
  npy_header h;
  int64_t n = 0;
  const uint8_t* src = open_data(f, h, n);
  npy_array a;
  a.shape = h.shape;
  a.source_dtype = h.dtype;
  a.data.resize(static_cast<size_t>(n));
  convert(src, h.dtype, n, a.data.data());
  return a;
}

std::vector<double> read_npy_f64(const std::string& path, std::vector<int64_t>& shape) {
  mapped_file f(path);
  npy_header h;
  int64_t n = 0;
  const uint8_t* src = open_data(f, h, n);
  shape = h.shape;
  std::vector<double> out(static_cast<size_t>(n));
  convert(src, h.dtype, n, out.data());
  return out;
}

void write_npy(const std::string& path, const float* data, const std::vector<int64_t>& shape, npy_dtype dtype) {
  const int64_t n = checked_numel(path, shape);
  if (n > 0 && !data) fail("{}: no data for shape of {} elements", path, n);
  if (dtype == npy_dtype::f32) return write_raw(path, dtype, shape, data, static_cast<size_t>(n) * 4);
  if (dtype == npy_dtype::f64) {
    std::vector<double> d(data, data + n);
    return write_raw(path, dtype, shape, d.data(), d.size() * 8);
  }
  std::vector<uint16_t> h(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    h[i] =
        static_cast<uint16_t>(formats::encode(formats::format::fp16, data[i], formats::rounding::nearest_even, false));
  write_raw(path, dtype, shape, h.data(), h.size() * 2);
}

void write_npy(const std::string& path, const double* data, const std::vector<int64_t>& shape) {
  const int64_t n = checked_numel(path, shape);
  if (n > 0 && !data) fail("{}: no data for shape of {} elements", path, n);
  write_raw(path, npy_dtype::f64, shape, data, static_cast<size_t>(n) * 8);
}

}  // namespace attnum::io
