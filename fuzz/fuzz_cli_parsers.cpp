// The CLI's list, knob, shard and condition parsers; each line of the input is one argument.
#include <nlohmann/json.hpp>
#include <sstream>

#include "attnum/attention/kernel_spec.h"
#include "attnum/attention/engine.h"
#include "attnum/scaleout/world.h"
#include "cli/list_option.h"
#include "fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string all(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> lines;
  std::istringstream in(all);
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  for (const auto& l : lines) {
    (void)attnum::cli::split_list(l);
    attnum::fuzz::expect_clean([&] { (void)attnum::scaleout::parse_shard(l); });
    attnum::fuzz::expect_clean([&] { (void)attnum::attention::parse_condition(l); });
    attnum::fuzz::expect_clean([&] { (void)attnum::attention::preset(l); });
  }
  // Every line a knob on the generic preset and on fa3; a valid spec must serialize.
  for (const char* base : {"generic", "fa3", "sage2pp-sm89"})
    attnum::fuzz::expect_clean([&] {
      const auto spec = attnum::attention::apply_knobs(attnum::attention::preset(base), lines);
      (void)attnum::attention::to_json(spec).dump();
    });
  return 0;
}
