// Reference logits saved once and reused (loss/reference_logits.h): a run that reads them gives
// the rows of a run that computes them, bit for bit; a file of another run (weights, reference,
// precision, N, texts, version, format) is refused naming the field; the weights' fingerprint
// sees one changed byte and one changed config field and not the thread count; the streaming
// safetensors writer writes write_safetensors's bytes and leaves nothing behind when it fails.
#include <gtest/gtest.h>
#include <omp.h>

#include <cstring>
#include <filesystem>
#include <random>
#include <nlohmann/json.hpp>

#include "attnum/core/error.h"
#include "attnum/io/safetensors.h"
#include "attnum/loss/loss_study.h"
#include "attnum/loss/reference_logits.h"
#include "formats/io_test_util.h"
#include "tiny_model.h"

namespace {
namespace fs = std::filesystem;
using namespace attnum::model;
using namespace attnum::loss;
using io_test::expect_error;

loss_params params(uint64_t seed = 11, int windows = 2) {
  loss_params p;
  std::mt19937_64 rng(seed);
  for (int s = 0; s < 2; ++s) {
    std::vector<int> ids;
    for (int i = 0; i < windows * 20 + 1; ++i) ids.push_back(int(rng() % 48));
    p.sources.push_back(ids);
    p.source_names.push_back("s" + std::to_string(s));
  }
  p.n_tokens = 20, p.windows = windows, p.kernel = attnum::attention::preset("fa3");
  p.conditions = {"plain", "rotate", "center"};
  p.bootstrap_samples = 100;
  return p;
}

std::string dump(const std::vector<loss_row>& rows) {
  std::string s;
  for (const auto& r : rows) s += to_json(r).dump() + "\n";
  return s;
}
std::string dump(const std::vector<paired_row>& rows) {
  std::string s;
  for (const auto& r : rows) s += to_json(r).dump() + "\n";
  return s;
}

TEST(reference_logits_test, a_saved_reference_gives_the_computed_rows_bit_for_bit) {
  const std::string dir = io_test::temp_dir(), path = dir + "/ref.safetensors";
  weights w = attnum::test::tiny_model(21);
  round_to_bf16(w);
  loss_params p = params();
  std::vector<paired_row> paired;
  const auto computed = run_loss(w, p, paired);
  EXPECT_EQ(save_reference_logits(path, w, p, false), 4);
  // The file is the reference forward of every window, exactly.
  {
    const attnum::io::safetensors_file f(path);
    EXPECT_EQ(f.metadata().at("format"), "attnum-reference-logits");
    EXPECT_EQ(f.metadata().at("weights_fingerprint"), fingerprint(w));
    const auto& lg = f.at("logits.3");  // source 1, window 1
    const std::vector<float> want = reference_forward(w, p, window_inputs(p, 1, 1));
    ASSERT_EQ(lg.nbytes, want.size() * 4);
    EXPECT_EQ(std::memcmp(lg.data, want.data(), lg.nbytes), 0);
  }
  p.reference_file = reference_logits::open(path, w, p);
  EXPECT_EQ(p.reference_file->windows(), 4);
  std::vector<paired_row> paired_file;
  const auto from_file = run_loss(w, p, paired_file);
  EXPECT_EQ(dump(from_file), dump(computed));
  EXPECT_EQ(dump(paired_file), dump(paired));
  // A subset of the windows (the first of each source): the rows a computed reference gives.
  loss_params q = params();
  q.windows = 1;
  for (auto& ids : q.sources) ids.resize(21);
  const auto q_computed = dump(run_loss(w, q));
  q.reference_file = reference_logits::open(path, w, q);
  EXPECT_EQ(dump(run_loss(w, q)), q_computed);
  // The file's id goes into shard and checkpoint parameters: shards of a computed and a
  // file-read reference are not merged together.
  const auto with = shard_to_json(p, w.id, 0, 1, {}), without = shard_to_json(params(), w.id, 0, 1, {});
  EXPECT_EQ(with["params"]["reference_logits"], p.reference_file->id());
  EXPECT_FALSE(without["params"].contains("reference_logits"));
  fs::remove_all(dir);
}

TEST(reference_logits_test, a_file_of_another_run_is_refused_naming_the_field) {
  const std::string dir = io_test::temp_dir(), path = dir + "/ref.safetensors";
  weights w = attnum::test::tiny_model(22);
  round_to_bf16(w);
  const loss_params p = params();
  save_reference_logits(path, w, p, false);
  // Other weights: one weight changed (by more than bf16 rounding takes away).
  weights w2 = attnum::test::tiny_model(22);
  {
    std::vector<float> v = w2.layers[1].wv.to_float();
    v[5] += 0.25f;
    w2.layers[1].wv = attnum::model::matrix(std::move(v));
  }
  round_to_bf16(w2);
  expect_error([&] { reference_logits::open(path, w2, p); }, {path, "weights_fingerprint", "other weights"});
  loss_params other = p;
  other.reference = "fp64";
  expect_error([&] { reference_logits::open(path, w, other); }, {"reference bf16 -> this run fp64"});
  other = p, other.linear = linear_precision::fp32;
  expect_error([&] { reference_logits::open(path, w, other); }, {"linear_precision bf16 -> this run fp32"});
  other = p, other.n_tokens = 10;
  expect_error([&] { reference_logits::open(path, w, other); }, {"n_tokens 20 -> this run 10"});
  // Other texts: opened, but no window has their ids.
  other = params(99);
  other.reference_file = reference_logits::open(path, w, other);
  expect_error(
      [&] {
        compute_window(w, other, {{0, 0, 0}});
      },
      {path, "none of its 4 windows has the input ids of source 0 window 0"});
  // Not a reference file: a safetensors file of something else, and a file that is not one.
  const std::string plain = dir + "/plain.safetensors";
  const std::vector<float> x = {1, 2};
  attnum::io::write_safetensors(plain, {{"x", {2}, x.data()}}, {{"format", "pt"}});
  expect_error([&] { reference_logits::open(plain, w, p); }, {plain, "not a reference-logits file", "'pt'"});
  io_test::write_bytes(dir + "/junk", "junk");
  EXPECT_THROW(reference_logits::open(dir + "/junk", w, p), attnum::error);
  // A file whose metadata claims more windows than it holds.
  {
    const attnum::io::safetensors_file f(path);
    auto meta = f.metadata();
    meta["windows"] = "5";
    std::vector<attnum::io::tensor_out> t;
    std::vector<std::vector<float>> keep;
    for (const auto& [name, view] : f.tensors()) {
      keep.push_back(view.to_float());
      t.push_back({name, view.shape, keep.back().data(), attnum::io::st_dtype::F32});
    }
    attnum::io::write_safetensors(dir + "/five.safetensors", t, meta);
    expect_error([&] { reference_logits::open(dir + "/five.safetensors", w, p); },
                 {"8 tensors, expected ids.K and logits.K for each of its 5 windows"});
  }
  fs::remove_all(dir);
}

TEST(reference_logits_test, fingerprint_sees_every_byte_and_field_and_not_the_threads) {
  const weights a = attnum::test::tiny_model(23), b = attnum::test::tiny_model(23);
  EXPECT_EQ(fingerprint(a), fingerprint(b));
  EXPECT_EQ(fingerprint(a).size(), 16u);
  const int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  const std::string one = fingerprint(a);
  omp_set_num_threads(2);
  EXPECT_EQ(fingerprint(a), one);
  omp_set_num_threads(saved);
  weights c = attnum::test::tiny_model(23);
  c.cfg.rope_theta = 10001.0f;
  EXPECT_NE(fingerprint(c), one);
  c = attnum::test::tiny_model(23);
  c.final_norm[3] = -c.final_norm[3];
  EXPECT_NE(fingerprint(c), one);
  c = attnum::test::tiny_model(23);
  round_to_bf16(c);  // the same values in another dtype are another model as the forward reads it
  EXPECT_NE(fingerprint(c), one);
}

TEST(reference_logits_test, streaming_writer_writes_write_safetensors_bytes_and_nothing_on_failure) {
  const std::string dir = io_test::temp_dir();
  const std::vector<float> a = {1.5f, -2.0f, 3.25f}, b = {7, 8, 9, 10};
  attnum::io::write_safetensors(dir + "/one.safetensors", {{"a", {3}, a.data()}, {"b", {2, 2}, b.data()}},
                                {{"k", "v"}});
  {
    attnum::io::safetensors_writer w(dir + "/two.safetensors",
                                     {{"a", attnum::io::st_dtype::F32, {3}}, {"b", attnum::io::st_dtype::F32, {2, 2}}},
                                     {{"k", "v"}});
    w.write_next(a.data(), 12);
    w.write_next(b.data(), 16);
    w.commit();
  }
  EXPECT_EQ(io_test::read_bytes(dir + "/one.safetensors"), io_test::read_bytes(dir + "/two.safetensors"));
  {
    attnum::io::safetensors_writer w(dir + "/three.safetensors",
                                     {{"a", attnum::io::st_dtype::F32, {3}}, {"b", attnum::io::st_dtype::F32, {2, 2}}});
    expect_error([&] { w.write_next(a.data(), 8); }, {"tensor 'a': 8 bytes given, its shape needs 12"});
    w.write_next(a.data(), 12);
    expect_error([&] { w.commit(); }, {"1 of 2 tensors written (next: 'b')"});
  }
  // Nothing at the path and no temp file left.
  EXPECT_FALSE(fs::exists(dir + "/three.safetensors"));
  int n = 0;
  for (const auto& e : fs::directory_iterator(dir)) (void)e, ++n;
  EXPECT_EQ(n, 2);
  fs::remove_all(dir);
}

}  // namespace
