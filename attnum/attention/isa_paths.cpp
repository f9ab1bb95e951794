#include "attnum/attention/isa_paths.h"

#include <string>
#include <vector>

#include "attnum/attention/fast_exp2.h"
#include "attnum/attention/isa.h"

namespace attnum::attention::isa {
nlohmann::json paths_json() {
  std::vector<std::string> supported;
  for (auto p : supported_paths()) supported.emplace_back(name(p));
  return {{"isa", std::string(name(active()))},
          {"isa_supported", supported},
          {"fp8_exact_sums", std::string(fp8_sums())},
          {"int8_qk_sums", std::string(int8_sums())},
          {"exp2f", std::string(fast::exp2f_path())}};
}
}  // namespace attnum::attention::isa
