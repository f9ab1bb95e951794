// GGUF reader: header, metadata, tensor infos and ranges, the model built from them (shapes,
// Q8_0 dequantisation, the llama q/k un-permutation) and the stored tokenizer.
#include "attnum/model/gguf.h"
#include "fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = attnum::fuzz::put("in.gguf", {reinterpret_cast<const char*>(data), size});
  attnum::fuzz::expect_clean([&] { (void)attnum::model::load_gguf(path); });
  attnum::fuzz::expect_clean([&] {
    const auto tok = attnum::model::load_gguf_tokenizer(path);
    (void)tok->encode("Hello, world 12345!\n");
  });
  return 0;
}
