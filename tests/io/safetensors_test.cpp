// safetensors reader/writer against hand-built files laid out per the format specification
// (https://github.com/huggingface/safetensors: u64 little-endian header size, JSON header, data).
#include "attnum/io/safetensors.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "attnum/core/error.h"
#include "attnum/formats/format.h"
#include "formats/io_test_util.h"  // shared temp-file helpers

namespace {
using namespace attnum::io;
using io_test::raw;

std::string st_bytes(const std::string& header, const std::string& data) {
  return raw(static_cast<uint64_t>(header.size())) + header + data;
}

std::string two_tensor_data() {
  std::string d;
  for (float v : {1.5f, -2.0f}) d += raw(v);
  for (uint16_t c : {0x3f80, 0xc040}) d += raw(c);  // bf16 1.0, -3.0
  return d;
}

const char* kTwoTensorHeader =
    R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
    R"("b":{"dtype":"BF16","shape":[1,2],"data_offsets":[8,12]},"__metadata__":{"model":"m","n":"3"}})";

TEST(safetensors, reads_hand_built_file) {
  const std::string path = io_test::temp_dir() + "/a.safetensors";
  io_test::write_bytes(path, st_bytes(kTwoTensorHeader, two_tensor_data()));
  const safetensors_file f(path);
  EXPECT_EQ(f.tensors().size(), 2u);
  EXPECT_EQ(f.metadata().at("model"), "m");
  EXPECT_EQ(f.metadata().at("n"), "3");
  const tensor_view& a = f.at("a");
  EXPECT_EQ(a.dtype, st_dtype::F32);
  EXPECT_EQ(a.shape, (std::vector<int64_t>{2}));
  EXPECT_EQ(a.to_float(), (std::vector<float>{1.5f, -2.0f}));
  const tensor_view& b = f.at("b");
  EXPECT_EQ(b.dtype, st_dtype::BF16);
  EXPECT_EQ(b.shape, (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(b.nbytes, 4u);
  EXPECT_EQ(b.to_float(), (std::vector<float>{1.0f, -3.0f}));
  EXPECT_EQ(f.find("c"), nullptr);
  io_test::expect_error([&] { f.at("c"); }, {path, "'c'"});
}

TEST(safetensors, integer_and_half_dtypes) {
  const std::string path = io_test::temp_dir() + "/i.safetensors";
  std::string d;
  d += raw(int64_t{-5});
  d += raw(int32_t{7});
  d += raw(uint16_t{0x3555});  // fp16 0.333251953125
  d += "\xff\x80";             // U8 255, I8 -128 (two 1-byte tensors)
  const std::string h =
      R"({"l":{"dtype":"I64","shape":[1],"data_offsets":[0,8]},"i":{"dtype":"I32","shape":[1],"data_offsets":[8,12]},)"
      R"("h":{"dtype":"F16","shape":[1],"data_offsets":[12,14]},"u":{"dtype":"U8","shape":[1],"data_offsets":[14,15]},)"
      R"("s":{"dtype":"I8","shape":[1],"data_offsets":[15,16]}})";
  io_test::write_bytes(path, st_bytes(h, d));
  const safetensors_file f(path);
  EXPECT_EQ(f.at("l").to_float()[0], -5.0f);
  EXPECT_EQ(f.at("i").to_double()[0], 7.0);
  EXPECT_EQ(f.at("h").to_float()[0], 0.333251953125f);
  EXPECT_EQ(f.at("u").to_float()[0], 255.0f);
  EXPECT_EQ(f.at("s").to_float()[0], -128.0f);
}

TEST(safetensors, write_read_round_trip_with_metadata) {
  const std::string dir = io_test::temp_dir(), path = dir + "/w.safetensors";
  std::vector<float> x(3 * 4 * 5);
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(static_cast<float>(i)) * 100.0f;
  x[7] = 1e30f;  // fp16 overflow -> Inf
  write_safetensors(path,
                    {{"layers.0.q", {3, 4, 5}, x.data(), st_dtype::BF16},
                     {"f32", {60}, x.data(), st_dtype::F32},
                     {"f16", {6, 10}, x.data(), st_dtype::F16},
                     {"f64", {2, 30}, x.data(), st_dtype::F64},
                     {"empty", {0, 4}, nullptr, st_dtype::F32}},
                    {{"tool", "attnum"}, {"text", "t1"}});
  const safetensors_file f(path);
  EXPECT_EQ(f.metadata().at("tool"), "attnum");
  const auto bf = f.at("layers.0.q").to_float();
  const auto h = f.at("f16").to_float();
  for (size_t i = 0; i < x.size(); ++i) {
    EXPECT_EQ(bf[i], attnum::formats::quantize_bf16(x[i]));
    EXPECT_EQ(h[i], static_cast<float>(attnum::formats::decode(
                        attnum::formats::format::fp16,
                        attnum::formats::encode(attnum::formats::format::fp16, x[i],
                                                attnum::formats::rounding::nearest_even, false))));
  }
  EXPECT_TRUE(std::isinf(h[7]));
  EXPECT_EQ(f.at("f32").to_float(), x);
  EXPECT_EQ(f.at("f64").to_float(), x);
  EXPECT_EQ(f.at("layers.0.q").shape, (std::vector<int64_t>{3, 4, 5}));
  EXPECT_EQ(f.at("empty").numel(), 0);
  // The header is padded to 8 bytes and nothing but the file is left in the folder.
  const std::string bytes = io_test::read_bytes(path);
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  EXPECT_EQ(n % 8, 0u);
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) files += e.is_regular_file();
  EXPECT_EQ(files, 1);
}

TEST(safetensors, rejects_bad_files_naming_file_tensor_and_field) {
  const std::string dir = io_test::temp_dir();
  const std::string good = st_bytes(kTwoTensorHeader, two_tensor_data());
  const auto bad = [&](const std::string& name, const std::string& bytes, std::initializer_list<std::string> parts) {
    const std::string p = dir + "/" + name;
    io_test::write_bytes(p, bytes);
    io_test::expect_error([&] { safetensors_file f(p); }, parts);
  };
  bad("short", "abc", {"short", "truncated"});
  bad("trunc", good.substr(0, good.size() - 2), {"trunc", "'b'", "truncated"});
  bad("hdrlen", raw(uint64_t{1} << 40) + "{}", {"hdrlen", "header length"});
  bad("json", st_bytes("{not json", ""), {"json", "JSON"});
  bad("lying", st_bytes(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", std::string(8, '\0')),
      {"lying", "'a'", "needs 12"});
  bad("dtype", st_bytes(R"({"a":{"dtype":"F8","shape":[2],"data_offsets":[0,2]}})", std::string(2, '\0')),
      {"dtype", "'a'", "F8"});
  bad("overlap",
      st_bytes(
          R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
          std::string(8, '\0')),
      {"overlap", "'b'", "overlaps"});
  bad("gap", st_bytes(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", std::string(8, '\0')),
      {"gap", "'a'", "gap"});
  bad("extra", good + "zz", {"extra", "after the last tensor"});
  bad("meta", st_bytes(R"({"__metadata__":{"k":1}})", ""), {"meta", "__metadata__", "'k'"});
  bad("offsets", st_bytes(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0]}})", std::string(4, '\0')),
      {"offsets", "'a'", "data_offsets"});
  bad("neg", st_bytes(R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", std::string(4, '\0')),
      {"neg", "'a'", "shape"});
  io_test::expect_error([&] { safetensors_file f(dir + "/none"); }, {"none"});
  std::vector<float> x(2);
  io_test::expect_error(
      [&] {
        write_safetensors(dir + "/d", {{"a", {2}, x.data()}, {"a", {2}, x.data()}});
      },
      {"'a'", "twice"});
  io_test::expect_error([&] { write_safetensors(dir + "/d", {{"a", {2}, x.data(), st_dtype::I8}}); }, {"'a'", "I8"});
}

}  // namespace
