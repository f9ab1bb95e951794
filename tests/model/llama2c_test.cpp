// llama2.c checkpoints written here from a random model (run.c's layout): round trip, shared
// and separate classifier; truncated files, lying headers and trailing bytes are clear errors,
// and the CLI exits 2 on them.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "attnum/core/error.h"
#include "attnum/model/llama2c.h"
#include "attnum/model/loader.h"
#include "../model/tiny_model.h"

namespace {
namespace fs = std::filesystem;
using attnum::model::weights;

// Writes w in run.c's order (the layers' arrays stacked), with RoPE tables of zeros.
void write_llama2c(const fs::path& path, const weights& w, bool shared, int32_t vocab_override = 0) {
  const auto& c = w.cfg;
  std::ofstream f(path, std::ios::binary);
  const int32_t h[7] = {c.dim,       c.hidden_dim,
                        c.n_layers,  c.n_head,
                        c.n_head_kv, vocab_override ? vocab_override : (shared ? c.vocab_size : -c.vocab_size),
                        c.seq_len};
  f.write(reinterpret_cast<const char*>(h), sizeof h);
  auto put = [&](const std::vector<float>& v) { f.write(reinterpret_cast<const char*>(v.data()), v.size() * 4); };
  auto put_matrix = [&](const attnum::model::matrix& m) { put(m.to_float()); };
  put_matrix(w.tok_embeddings);
  using lw = attnum::model::layer_weights;
  for (const auto& L : w.layers) put(L.attn_norm);
  for (auto field : {&lw::wq, &lw::wk, &lw::wv, &lw::wo})
    for (const auto& L : w.layers) put_matrix(L.*field);
  for (const auto& L : w.layers) put(L.ffn_norm);
  for (auto field : {&lw::w1, &lw::w2, &lw::w3})
    for (const auto& L : w.layers) put_matrix(L.*field);
  put(w.final_norm);
  put(std::vector<float>(size_t(c.seq_len) * c.d_head, 0.0f));  // freq_cis_real + imag
  if (!shared) put_matrix(w.classifier);
}

fs::path tmp(const std::string& name) {
  return fs::temp_directory_path() / ("attnum_llama2c_" + name + "_" + std::to_string(::getpid()) + ".bin");
}

std::string error_of(const fs::path& p) {
  try {
    attnum::model::load_llama2c(p.string());
  } catch (const attnum::error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(llama2c_test, round_trip_separate_and_shared_classifier) {
  const weights w = attnum::test::tiny_model(21);
  const fs::path p = tmp("rt");
  write_llama2c(p, w, false);
  weights r = attnum::model::load_llama2c(p.string());
  EXPECT_FALSE(r.cfg.tied_embeddings);
  EXPECT_EQ(r.cfg.vocab_size, w.cfg.vocab_size);
  EXPECT_EQ(r.cfg.d_head, 8);
  EXPECT_EQ(r.tok_embeddings, w.tok_embeddings);
  EXPECT_EQ(r.classifier, w.classifier);
  for (int l = 0; l < w.cfg.n_layers; ++l) {
    EXPECT_EQ(r.layers[l].wk, w.layers[l].wk);
    EXPECT_EQ(r.layers[l].w2, w.layers[l].w2);
  }
  write_llama2c(p, w, true);
  r = attnum::model::load_llama2c(p.string());
  EXPECT_TRUE(r.cfg.tied_embeddings);
  EXPECT_TRUE(r.classifier.empty());
  EXPECT_EQ(&r.output_matrix(), &r.tok_embeddings);
  fs::remove(p);
}

TEST(llama2c_test, truncated_lying_and_padded_files_are_errors) {
  const weights w = attnum::test::tiny_model(22);
  const fs::path p = tmp("bad");
  write_llama2c(p, w, false);
  fs::resize_file(p, fs::file_size(p) - 4);
  EXPECT_NE(error_of(p).find("truncated"), std::string::npos) << error_of(p);
  fs::resize_file(p, 10);
  EXPECT_NE(error_of(p).find("header needs 28"), std::string::npos) << error_of(p);
  write_llama2c(p, w, false, 1 << 30);  // vocab that the file cannot hold
  EXPECT_NE(error_of(p).find("lying header"), std::string::npos) << error_of(p);
  write_llama2c(p, w, true);
  std::ofstream(p, std::ios::app | std::ios::binary) << "junk";
  EXPECT_NE(error_of(p).find("trailing bytes"), std::string::npos) << error_of(p);
  weights odd = w;
  odd.cfg.n_head_kv = 3;  // 4 heads not a multiple of 3
  write_llama2c(p, odd, true);
  EXPECT_NE(error_of(p).find("n_kv_heads"), std::string::npos) << error_of(p);
  // Through the CLI: exit status 2 and "error: " naming the file.
  write_llama2c(p, w, false);
  fs::resize_file(p, fs::file_size(p) / 2);
  const std::string cmd = std::string(ATTNUM_BINARY) + " capture --model " + p.string() +
                          " --token-ids /dev/null --tokens 4 --out /tmp/attnum_never 2>/dev/null";
  EXPECT_EQ(WEXITSTATUS(std::system(cmd.c_str())), 2);
  EXPECT_FALSE(fs::exists("/tmp/attnum_never"));
  fs::remove(p);
}
}  // namespace
