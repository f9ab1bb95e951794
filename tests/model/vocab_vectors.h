#pragma once
// Tokenizer test vectors in llama.cpp's test-tokenizer-0 format: inputs separated by
// "\n__ggml_vocab_test__\n" in the .inp file, one line of space-separated ids per input in the .out
// file. The golden tests of tokenizer.json and GGUF vocabularies read and check them here.
#include <gtest/gtest.h>

#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "attnum/core/file.h"
#include "attnum/model/tokenizer.h"

namespace attnum::test {

struct vocab_vectors {
  std::vector<std::string> inputs;
  std::vector<std::vector<int>> ids;  ///< ids[i]: the expected encoding of inputs[i]
};

inline vocab_vectors read_vocab_vectors(const std::string& inp, const std::string& out) {
  vocab_vectors v;
  const std::string s = read_file(inp), sep = "\n__ggml_vocab_test__\n";
  size_t pos = 0;
  for (size_t at; (at = s.find(sep, pos)) != std::string::npos; pos = at + sep.size())
    v.inputs.push_back(s.substr(pos, at - pos));
  std::istringstream outs(read_file(out));
  for (std::string line; std::getline(outs, line);) {
    std::istringstream ls(line);
    v.ids.emplace_back(std::istream_iterator<int>(ls), std::istream_iterator<int>());
  }
  return v;
}

/// Checks that tok encodes every input of VECTORS.inp to its ids in VECTORS.out, and that the
/// ids decode back to the input: each id given the one before it when `chain` (decode(prev, id):
/// SentencePiece drops the prefix space of a text's first token), else decode(-1, id).
inline void expect_every_vector(const model::tokenizer& tok, const std::string& vectors, bool chain) {
  const auto [inputs, want] = read_vocab_vectors(vectors + ".inp", vectors + ".out");
  ASSERT_EQ(inputs.size(), want.size());
  ASSERT_GE(inputs.size(), 40u);
  int failures = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const std::vector<int> got = tok.encode(inputs[i]);
    EXPECT_EQ(got, want[i]) << "case " << i << ": '" << inputs[i] << "'";
    failures += got != want[i];
    std::string back;
    int prev = -1;
    for (int id : got) back += tok.decode(chain ? prev : -1, id), prev = id;
    EXPECT_EQ(back, inputs[i]) << "round trip, case " << i;
  }
  EXPECT_EQ(failures, 0) << "of " << inputs.size() << " cases";
}

}  // namespace attnum::test
