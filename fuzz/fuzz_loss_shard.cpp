// Loss shard files (attnum loss --shard I/N) as attnum merge reads them: parsed with the
// bounded JSON reader, validated field by field, merged into loss rows.
#include "attnum/loss/loss_study.h"
#include "fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto dir = attnum::fuzz::scratch() / "shards";
  std::filesystem::remove_all(dir);
  attnum::fuzz::put("shards/loss-shard-0-of-1.json", {reinterpret_cast<const char*>(data), size});
  const std::string out = (attnum::fuzz::scratch() / "merged").string();
  attnum::fuzz::expect_clean([&] { (void)attnum::loss::merge_shard_dirs({dir.string()}, out); });
  return 0;
}
