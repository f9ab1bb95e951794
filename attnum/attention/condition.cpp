// The conditions' names (condition.h).
#include "attnum/attention/condition.h"

#include "attnum/core/error.h"
#include "attnum/core/suggest.h"
#include "attnum/core/file.h"

namespace attnum::attention {

std::string_view condition_name(condition c) {
  const auto i = static_cast<size_t>(c);
  return i < std::size(kConditionNames) ? kConditionNames[i] : "?";
}

condition parse_condition(std::string_view text) {
  if (text == "tile") return condition::plain;  // the legacy name of plain
  for (size_t i = 0; i < std::size(kConditionNames); ++i)
    if (text == kConditionNames[i]) return static_cast<condition>(i);
  const std::string hint = did_you_mean(text, {kConditionNames.begin(), kConditionNames.end()});
  std::string known;
  for (size_t i = 0; i < kNumConditions; ++i)
    known += std::string(i == 0 ? "" : i + 1 == kNumConditions ? " or " : ", ") + kConditionNames[i];
  fail("unknown condition '{}'{} (expected {})", clip(text), hint.empty() ? "" : ": " + hint, known);
}

}  // namespace attnum::attention
