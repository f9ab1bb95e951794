// safetensors reader: header JSON, dtypes, shapes, offsets, and the conversion of every tensor.
#include "attnum/io/safetensors.h"
#include "fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = attnum::fuzz::put("in.safetensors", {reinterpret_cast<const char*>(data), size});
  attnum::fuzz::expect_clean([&] {
    const attnum::io::safetensors_file f(path);
    for (const auto& [name, t] : f.tensors())
      if (t.numel() <= (1 << 16)) (void)t.to_float(), (void)t.to_double();
    (void)f.metadata();
  });
  return 0;
}
