// Head-study result folders read back by resume and merge: the first byte picks the file the
// rest becomes (0: checkpoints/study.json, read as a plan and checked against one; 1: a unit
// checkpoint, verified against a small zoo plan; 2: complete.json, checked against the folder).
#include "attnum/core/file.h"
#include "attnum/study/checkpoint.h"
#include "attnum/study/head_study.h"
#include "fuzz/fuzz_util.h"

namespace {
const attnum::study::plan& small_plan() {
  static const attnum::study::plan p = [] {
    attnum::study::study_options o;
    o.zoo_opt.n_tok = 16;
    o.zoo_opt.n_layer_cap = 1;
    o.n_texts = 1;
    o.conditions = {"plain", "rotate"};
    o.bootstrap_resamples = 10;
    return attnum::study::make_plan(o);
  }();
  return p;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const std::string_view bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
  const auto dir = attnum::fuzz::scratch() / "results";
  std::filesystem::remove_all(dir);
  switch (data[0] % 3) {
    case 0:
      attnum::fuzz::put("results/checkpoints/study.json", bytes);
      attnum::fuzz::expect_clean([&] { (void)attnum::study::read_plan(dir); });
      attnum::fuzz::expect_clean([&] { attnum::study::write_plan(dir, small_plan()); });
      break;
    case 1:
      attnum::fuzz::put("results/checkpoints/unit-000000.jsonl", bytes);
      attnum::fuzz::expect_clean([&] { (void)attnum::study::read_unit(dir, small_plan(), 0); });
      break;
    default:
      attnum::fuzz::put("results/summary.json", "{}\n");
      attnum::fuzz::put("results/complete.json", bytes);
      attnum::fuzz::expect_clean([&] { attnum::require_complete(dir, "fuzz"); });
      break;
  }
  return 0;
}
