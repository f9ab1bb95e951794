// Golden: greedy decoding of stories260K (llama2.c format) from BOS reproduces the documented
// reference ids and text (data/stories260K_greedy_reference*.txt, made with run.c).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>

#include "attnum/model/llama2c.h"
#include "attnum/model/tokenizer.h"
#include "attnum/model/transformer.h"

namespace {
const std::string kData = std::string(ATTNUM_DATA_DIR) + "/";

std::vector<int> read_ids(const std::string& path) {
  std::ifstream f(path);
  return {std::istream_iterator<int>(f), std::istream_iterator<int>()};
}

TEST(stories_golden_test, greedy_from_bos_matches_reference_ids_and_text) {
  ASSERT_TRUE(std::filesystem::exists(kData + "stories260K.bin")) << kData << "stories260K.bin";
  auto w = attnum::model::load_llama2c(kData + "stories260K.bin");
  EXPECT_EQ(w.cfg.dim, 64);
  EXPECT_EQ(w.cfg.n_layers, 5);
  EXPECT_EQ(w.cfg.n_head, 8);
  EXPECT_EQ(w.cfg.n_head_kv, 4);
  EXPECT_EQ(w.cfg.vocab_size, 512);
  const std::vector<int> want = read_ids(kData + "stories260K_greedy_reference_ids.txt");
  ASSERT_FALSE(want.empty());
  std::vector<int> got = attnum::model::greedy(w, {1}, static_cast<int>(want.size()));
  got.erase(got.begin());  // BOS
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) ASSERT_EQ(got[i], want[i]) << "at step " << i;

  // The decoded text matches the documented output (run.c's decode: strip the space after BOS).
  auto tok = attnum::model::load_llama2c_tokenizer(kData + "tok512.bin", w.cfg.vocab_size);
  std::string text;
  int prev = 1;
  for (int id : got) text += tok->decode(prev, id), prev = id;
  std::ifstream f(kData + "stories260K_greedy_reference.txt");
  std::string ref((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  while (!ref.empty() && (ref.back() == '\n' || ref.back() == ' ')) ref.pop_back();
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  EXPECT_EQ(text.substr(0, ref.size()), ref);
}

TEST(stories_golden_test, tokenizer_round_trips_the_reference_text) {
  ASSERT_TRUE(std::filesystem::exists(kData + "tok512.bin")) << kData << "tok512.bin";
  auto tok = attnum::model::load_llama2c_tokenizer(kData + "tok512.bin", 512);
  std::ifstream f(kData + "stories260K_greedy_reference.txt");
  std::string ref((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  std::vector<int> ids = tok->encode(ref);
  std::string back;
  int prev = 1;  // as after BOS: the dummy-prefix space is stripped
  for (int id : ids) back += tok->decode(prev, id), prev = id;
  EXPECT_EQ(back, ref);
}
}  // namespace
