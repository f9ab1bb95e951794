// tokenizer.json: the input up to its first NUL byte is the file; the rest is text to encode
// with it (then every id is decoded).
#include <cstring>

#include "attnum/model/tokenizer.h"
#include "fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view all(reinterpret_cast<const char*>(data), size);
  const size_t nul = all.find('\0');
  const std::string_view json = all.substr(0, nul), text = nul == all.npos ? "" : all.substr(nul + 1);
  const std::string path = attnum::fuzz::put("tokenizer.json", json);
  attnum::fuzz::expect_clean([&] {
    const auto tok = attnum::model::load_hf_tokenizer(path);
    for (int id : tok->encode(text)) (void)tok->decode(-1, id);
  });
  return 0;
}
