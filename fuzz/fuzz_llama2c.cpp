// llama2.c checkpoint (header + weights) and llama2.c tokenizer files.
#include "attnum/model/llama2c.h"
#include "attnum/model/tokenizer.h"
#include "fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  const std::string path = attnum::fuzz::put("model.bin", bytes);
  attnum::fuzz::expect_clean([&] { (void)attnum::model::load_llama2c(path); });
  // The same bytes as a tokenizer; the first byte picks the model's vocab_size (small, to stay fast),
  // then encode a fixed text and decode every id.
  if (size < 1) return 0;
  const std::string tpath = attnum::fuzz::put("tok.bin", bytes.substr(1));
  attnum::fuzz::expect_clean([&] {
    const auto tok = attnum::model::load_llama2c_tokenizer(tpath, 250 + data[0]);
    const auto ids = tok->encode("Once upon a time \xff\xfe there was \xe2\x82\xac 42");
    for (int id : ids) (void)tok->decode(1, id);
  });
  return 0;
}
