// The layer pipeline's pieces in one process: the balanced split, a slice that holds only its
// layers, and embed + forward_layers over consecutive ranges + classify equal to forward().
#include <gtest/gtest.h>

#include <filesystem>
#include <numeric>

#include "attnum/core/error.h"
#include "attnum/model/loader.h"
#include "attnum/model/transformer.h"
#include "attnum/scaleout/layers.h"

namespace {
using namespace attnum;

const std::string kModel = std::string(ATTNUM_DATA_DIR) + "/stories260K.bin";

TEST(layers_test, split_is_contiguous_balanced_and_covers_every_layer) {
  for (int n_layers : {1, 5, 7, 80})
    for (int ranks = 1; ranks <= n_layers && ranks <= 9; ++ranks) {
      int next = 0;
      for (int r = 0; r < ranks; ++r) {
        const model::layer_slice s = scaleout::split_layers(n_layers, r, ranks);
        EXPECT_EQ(s.begin, next);
        EXPECT_GE(s.end - s.begin, n_layers / ranks);
        EXPECT_LE(s.end - s.begin, n_layers / ranks + 1);
        EXPECT_EQ(s.embeddings, r == 0);
        EXPECT_EQ(s.head, r == ranks - 1);
        next = s.end;
      }
      EXPECT_EQ(next, n_layers);
    }
  EXPECT_EQ(scaleout::split_layers(5, 0, 2).end, 3);    // 3 + 2
  EXPECT_EQ(scaleout::split_layers(5, 2, 3).begin, 4);  // 2 + 2 + 1
  EXPECT_THROW(scaleout::split_layers(5, 0, 6), error);
}

TEST(layers_test, consecutive_ranges_equal_forward_bit_for_bit) {
  const model::weights w = model::load_model(kModel);
  std::vector<int> ids(40);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = int((i * 37 + 11) % size_t(w.cfg.vocab_size));
  for (auto p : {model::linear_precision::fp32, model::linear_precision::bf16}) {
    model::weights wp = w;
    model::prepare_weights(wp, p);
    model::forward_options opt;
    opt.linear = p;
    const std::vector<float> want = model::forward(wp, ids, opt);
    for (int ranks = 1; ranks <= 3; ++ranks) {
      std::vector<float> x = model::embed(wp, ids);
      for (int r = 0; r < ranks; ++r) {
        const model::layer_slice s = scaleout::split_layers(w.cfg.n_layers, r, ranks);
        model::forward_layers(wp, int(ids.size()), x, s.begin, s.end, opt);
      }
      EXPECT_EQ(model::classify(wp, int(ids.size()), x, opt), want) << ranks << " ranks";
    }
  }
}

TEST(layers_test, a_slice_holds_only_its_layers_and_keeps_the_checkpoint_precision) {
  const model::weights full = model::load_model(kModel);
  size_t sum = 0;
  for (int r = 0; r < 3; ++r) {
    const model::weights w =
        model::load_model(kModel, [r](const model::config& c) { return scaleout::split_layers(c.n_layers, r, 3); });
    EXPECT_TRUE(w.partial);
    EXPECT_EQ(model::checkpoint_precision(w), model::checkpoint_precision(full));
    EXPECT_LT(w.bytes(), full.bytes());
    const model::layer_slice s = scaleout::split_layers(w.cfg.n_layers, r, 3);
    for (int l = 0; l < w.cfg.n_layers; ++l)
      EXPECT_EQ(w.layers[size_t(l)].wq.empty(), l < s.begin || l >= s.end) << "rank " << r << " layer " << l;
    EXPECT_EQ(w.tok_embeddings.empty(), r == 1);  // rank 0 embeds; rank 2 classifies (tied: the table)
    sum += w.bytes();
  }
  // The layers are held once across the ranks; only the tied table is held twice.
  EXPECT_EQ(sum, full.bytes() + full.tok_embeddings.bytes());
  // Under bf16 a slice's weight bytes are its own tensors' (not the whole model's).
  model::weights w1 =
      model::load_model(kModel, [](const model::config& c) { return scaleout::split_layers(c.n_layers, 1, 3); });
  EXPECT_LT(model::weight_bytes(w1, model::linear_precision::bf16),
            model::weight_bytes(full, model::linear_precision::bf16) / 2);
}
}  // namespace
