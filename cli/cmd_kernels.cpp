// attnum kernels: lists the presets and their knobs (--json: an array of kernel_spec objects).
#include <fmt/core.h>

#include <nlohmann/json.hpp>

#include "attnum/attention/kernel_spec.h"
#include "cli/command.h"
#include "cli/output_option.h"

namespace {
void setup(CLI::App& app) {
  auto output = std::make_shared<attnum::cli::output_flags>();
  attnum::cli::add_output_options(app, *output, "Print the presets and every knob as JSON");
  app.callback([output] {
    using namespace attnum::attention;
    nlohmann::json rows = nlohmann::json::array();
    for (const auto& name : preset_names()) rows.push_back(to_json(preset(name)));
    if (attnum::cli::print_output(*output, rows, 1)) return;
    for (const auto& r : rows) {
      fmt::print("{:<18} {}\n", r["name"].get<std::string>(), r["description"].get<std::string>());
      fmt::print(
          "  q {} {}  k {} {}  v {} {}  P {} {} S={}  order {}  block_n {}  acc qk {} pv {} ({})  out {}  transforms "
          "{}\n",
          r["q"]["fmt"].get<std::string>(), r["q"]["gran"].get<std::string>(), r["k"]["fmt"].get<std::string>(),
          r["k"]["gran"].get<std::string>(), r["v"]["fmt"].get<std::string>(), r["v"]["gran"].get<std::string>(),
          r["p_fmt"].get<std::string>(), r["p_mode"].get<std::string>(), r["p_scale"].get<float>(),
          r["reverse"].get<bool>() ? "reverse" : "forward",
          r["tiles"].empty() ? std::to_string(r["block_n"].get<int>()) : std::string("by head dim"),
          r["qk_acc"]["kind"].get<std::string>(), r["pv_acc"]["kind"].get<std::string>(), r["pv"].get<std::string>(),
          r["out_fmt"].get<std::string>(), r["transform_dtype"].get<std::string>());
    }
  });
}
}  // namespace
ATTNUM_COMMAND("kernels", "List the kernel presets and their knobs", setup);
