// Hugging Face folders: config.json (first byte even) or model.safetensors.index.json beside a
// valid config (first byte odd), loaded as a checkpoint.
#include "attnum/model/hf_checkpoint.h"
#include "fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const std::string_view bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
  const std::string dir = (attnum::fuzz::scratch() / "hf").string();
  std::filesystem::remove_all(dir);
  if (data[0] % 2 == 0) {
    const std::string path = attnum::fuzz::put("hf/config.json", bytes);
    attnum::fuzz::expect_clean([&] { (void)attnum::model::read_hf_config(path); });
    attnum::fuzz::expect_clean([&] { (void)attnum::model::load_hf_checkpoint(dir); });
  } else {
    attnum::fuzz::put("hf/config.json",
                      R"({"model_type": "llama", "hidden_size": 8, "intermediate_size": 8, "num_hidden_layers": 1,
                          "num_attention_heads": 2, "vocab_size": 4, "max_position_embeddings": 8})");
    attnum::fuzz::put("hf/model.safetensors.index.json", bytes);
    attnum::fuzz::expect_clean([&] { (void)attnum::model::load_hf_checkpoint(dir); });
  }
  return 0;
}
