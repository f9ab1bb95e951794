// Capture files: post-RoPE Q/K/V in bf16 with the engine's layout and the documented metadata,
// read back with the safetensors reader and compared with the forward's operands.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "attnum/formats/format.h"
#include "attnum/model/capture.h"
#include "attnum/model/hooks.h"
#include "attnum/io/safetensors.h"
#include "tiny_model.h"

namespace {
using namespace attnum::model;

TEST(capture_test, file_holds_bf16_post_rope_operands_and_metadata) {
  weights w = attnum::test::tiny_model(31);
  round_to_bf16(w);
  std::vector<int> ids(17);
  for (int i = 0; i < 17; ++i) ids[i] = (5 * i + 3) % 48;
  const std::string path =
      std::filesystem::temp_directory_path() / ("attnum_capture_" + std::to_string(::getpid()) + ".safetensors");
  write_capture(w, ids, {"text-a", "abc", "tok", "", ""}, linear_precision::bf16, path);
  // The operands the forward hands to attention, recomputed independently of the writer.
  std::vector<std::vector<float>> q(3), k(3), v(3);
  forward_options opt;
  opt.linear = linear_precision::bf16;
  opt.attention = reference_attention("bf16");
  opt.on_qkv = [&](int l, const qkv_view& x) {
    q[l].assign(x.q, x.q + 4 * 17 * 8), k[l].assign(x.k, x.k + 2 * 17 * 8), v[l].assign(x.v, x.v + 2 * 17 * 8);
  };
  forward(w, ids, opt);
  const attnum::io::safetensors_file r(path);
  for (int l = 0; l < 3; ++l) {
    const attnum::io::tensor_view* tq = r.find("layers." + std::to_string(l) + ".q");
    const attnum::io::tensor_view* tk = r.find("layers." + std::to_string(l) + ".k");
    const attnum::io::tensor_view* tv = r.find("layers." + std::to_string(l) + ".v");
    ASSERT_TRUE(tq && tk && tv);
    EXPECT_EQ(tq->dtype, attnum::io::st_dtype::BF16);
    EXPECT_EQ(tq->shape, (std::vector<int64_t>{4, 17, 8}));
    EXPECT_EQ(tk->shape, (std::vector<int64_t>{2, 17, 8}));
    EXPECT_EQ(tq->to_float(), q[l]);  // bf16 mode: already on the bf16 grid
    EXPECT_EQ(tk->to_float(), k[l]);
    EXPECT_EQ(tv->to_float(), v[l]);
  }
  EXPECT_EQ(r.metadata().at("model"), "tiny");
  EXPECT_EQ(r.metadata().at("text"), "text-a");
  EXPECT_EQ(r.metadata().at("n_tok"), "17");
  EXPECT_EQ(r.metadata().at("text_hash"), "abc");
  EXPECT_TRUE(r.metadata().count("tool_version"));
  std::filesystem::remove(path);
  EXPECT_EQ(capture_file_name("Qwen2.5 0.5B", "a/b"), "Qwen2.5_0.5B__a_b.safetensors");
}
}  // namespace
