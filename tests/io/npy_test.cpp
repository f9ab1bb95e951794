// npy reader/writer against hand-built files laid out per the NumPy format specification.
#include "attnum/io/npy.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "attnum/core/error.h"
#include "attnum/formats/format.h"
#include "formats/io_test_util.h"  // shared temp-file helpers

namespace {
using namespace attnum::io;
using io_test::raw;

// A version-1.0 file as numpy.save writes it: magic, version, uint16 header length, the dict
// padded with spaces to a 64-byte boundary and ended by '\n', then the data.
std::string npy_bytes(const std::string& dict, const std::string& data, char major = 1) {
  std::string h = dict;
  const size_t prefix = major == 1 ? 10 : 12;
  h.append((64 - (prefix + h.size() + 1) % 64) % 64, ' ');
  h += '\n';
  std::string out = "\x93NUMPY";
  out += major;
  out += '\0';
  const auto n = static_cast<uint32_t>(h.size());
  out += static_cast<char>(n & 0xff);
  out += static_cast<char>((n >> 8) & 0xff);
  if (major != 1) {
    out += static_cast<char>((n >> 16) & 0xff);
    out += static_cast<char>(n >> 24);
  }
  return out + h + data;
}

TEST(npy, reads_hand_built_float32) {
  const std::string dir = io_test::temp_dir(), path = dir + "/a.npy";
  std::string data;
  for (float v : {1.0f, -2.5f, 3.0f, 0.125f, 5.0f, 6.0f}) data += raw(v);
  io_test::write_bytes(path, npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", data));
  const npy_array a = read_npy(path);
  EXPECT_EQ(a.shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(a.source_dtype, npy_dtype::f32);
  EXPECT_EQ(a.data, (std::vector<float>{1.0f, -2.5f, 3.0f, 0.125f, 5.0f, 6.0f}));
}

TEST(npy, reads_float64_and_float16_and_version2) {
  const std::string dir = io_test::temp_dir();
  std::string d64;
  for (double v : {0.1, -7.0}) d64 += raw(v);
  io_test::write_bytes(dir + "/d.npy",
                       npy_bytes("{'descr': '<f8', 'fortran_order': False, 'shape': (1, 1, 2), }", d64, 2));
  const npy_array a = read_npy(dir + "/d.npy");
  EXPECT_EQ(a.shape, (std::vector<int64_t>{1, 1, 2}));
  EXPECT_EQ(a.source_dtype, npy_dtype::f64);
  EXPECT_EQ(a.data, (std::vector<float>{0.1f, -7.0f}));
  std::vector<int64_t> shape;
  EXPECT_EQ(read_npy_f64(dir + "/d.npy", shape), (std::vector<double>{0.1, -7.0}));
  // fp16 codes: 0x3c00 = 1, 0xc000 = -2, 0x0001 = 2^-24, 0x7c00 = Inf.
  std::string d16;
  for (uint16_t c : {0x3c00, 0xc000, 0x0001, 0x7c00}) d16 += raw(c);
  io_test::write_bytes(dir + "/h.npy", npy_bytes("{'descr': '<f2', 'fortran_order': False, 'shape': (4,), }", d16));
  const npy_array h = read_npy(dir + "/h.npy");
  EXPECT_EQ(h.source_dtype, npy_dtype::f16);
  EXPECT_EQ(h.data[0], 1.0f);
  EXPECT_EQ(h.data[1], -2.0f);
  EXPECT_EQ(h.data[2], 0x1p-24f);
  EXPECT_TRUE(std::isinf(h.data[3]));
}

TEST(npy, writer_output_is_the_spec_layout) {
  const std::string dir = io_test::temp_dir(), path = dir + "/w.npy";
  const std::vector<float> x = {1, 2, 3, 4, 5, 6};
  write_npy(path, x.data(), {2, 3});
  std::string data;
  for (float v : x) data += raw(v);
  EXPECT_EQ(io_test::read_bytes(path), npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", data));
  write_npy(path, x.data(), {6});
  EXPECT_EQ(io_test::read_bytes(path), npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (6,), }", data));
  for (const auto& e : std::filesystem::directory_iterator(dir))
    EXPECT_EQ(e.path().filename(), "w.npy");  // no temp file left behind
}

TEST(npy, round_trips) {
  const std::string dir = io_test::temp_dir();
  std::vector<float> x(2 * 3 * 4);
  for (size_t i = 0; i < x.size(); ++i) x[i] = 0.1f * static_cast<float>(i) - 1.0f;
  write_npy(dir + "/f.npy", x.data(), {2, 3, 4});
  EXPECT_EQ(read_npy(dir + "/f.npy").data, x);
  write_npy(dir + "/d.npy", x.data(), {4, 6}, npy_dtype::f64);
  EXPECT_EQ(read_npy(dir + "/d.npy").data, x);
  write_npy(dir + "/h.npy", x.data(), {4, 6}, npy_dtype::f16);
  const npy_array h = read_npy(dir + "/h.npy");
  for (size_t i = 0; i < x.size(); ++i)
    EXPECT_EQ(h.data[i],
              static_cast<float>(attnum::formats::decode(
                  attnum::formats::format::fp16, attnum::formats::encode(attnum::formats::format::fp16, x[i]))));
  const std::vector<double> y = {0.1, 1e-300, -3.0};
  write_npy(dir + "/y.npy", y.data(), {3, 1});
  std::vector<int64_t> shape;
  EXPECT_EQ(read_npy_f64(dir + "/y.npy", shape), y);
  EXPECT_EQ(shape, (std::vector<int64_t>{3, 1}));
}

TEST(npy, bad_files_name_the_file_and_the_field) {
  const std::string dir = io_test::temp_dir();
  const std::string good =
      npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }", std::string(16, '\0'));
  io_test::write_bytes(dir + "/t.npy", good.substr(0, good.size() - 3));
  io_test::expect_error([&] { read_npy(dir + "/t.npy"); }, {dir + "/t.npy", "truncated"});
  io_test::write_bytes(dir + "/x.npy", good + "xx");
  io_test::expect_error([&] { read_npy(dir + "/x.npy"); }, {"x.npy", "bytes"});
  io_test::write_bytes(dir + "/m.npy", "NOTNUMPY" + good.substr(8));
  io_test::expect_error([&] { read_npy(dir + "/m.npy"); }, {"m.npy", "magic"});
  io_test::write_bytes(dir + "/b.npy", npy_bytes("{'descr': '>f4', 'fortran_order': False, 'shape': (1,), }", "abcd"));
  io_test::expect_error([&] { read_npy(dir + "/b.npy"); }, {"b.npy", "descr", ">f4"});
  io_test::write_bytes(dir + "/o.npy", npy_bytes("{'descr': '<f4', 'fortran_order': True, 'shape': (1,), }", "abcd"));
  io_test::expect_error([&] { read_npy(dir + "/o.npy"); }, {"o.npy", "fortran_order"});
  io_test::write_bytes(dir + "/s.npy",
                       npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (1, x), }", "abcd"));
  io_test::expect_error([&] { read_npy(dir + "/s.npy"); }, {"s.npy", "dimension"});
  io_test::expect_error([&] { read_npy(dir + "/missing.npy"); }, {"missing.npy"});
}

}  // namespace
