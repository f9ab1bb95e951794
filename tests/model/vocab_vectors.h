#pragma once
// Tokenizer test vectors in llama.cpp's test-tokenizer-0 format: inputs separated by
// "\n__ggml_vocab_test__\n" in the .inp file, one line of space-separated ids per input in the .out
// file. The golden tests of tokenizer.json files read them here.
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "attnum/core/file.h"

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

}  // namespace attnum::test
