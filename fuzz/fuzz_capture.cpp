// Capture files (layers.{l}.q/k/v) and kernel-output files (layers.{l}.o.{condition}): the
// head study's capture reader, and the output tensor read as transfer reads it.
#include "attnum/io/safetensors.h"
#include "attnum/study/head_study.h"
#include "fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = attnum::fuzz::put("m__t.safetensors", {reinterpret_cast<const char*>(data), size});
  attnum::fuzz::expect_clean([&] { (void)attnum::study::load_capture_layer(path, 0); });
  attnum::fuzz::expect_clean([&] {
    const attnum::io::safetensors_file st(path);
    const auto& t = st.at("layers.0.o.plain");
    if (t.numel() <= (1 << 16)) (void)t.to_float();
  });
  return 0;
}
