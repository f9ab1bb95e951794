#pragma once
// The conditions: the transforms applied to Q and K before a kernel (never to V). One table gives
// each condition's name and what it does; every list of conditions, default and check derives
// from it.
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace attnum::attention {

enum class condition : uint8_t { plain, rotate, center, center_rotate };

/// One row per condition, indexed by `condition` (design.md's canonical order).
struct condition_info {
  const char* name;
  bool centers;  ///< subtracts the mean key (per kv head) from K
  bool rotates;  ///< rotates Q and K by one matrix (after centering)
};
inline constexpr condition_info kConditions[] = {
    {"plain", false, false}, {"rotate", false, true}, {"center", true, false}, {"center+rotate", true, true}};
inline constexpr std::size_t kNumConditions = std::size(kConditions);

/// The conditions' names in table order.
inline constexpr std::array<const char*, kNumConditions> kConditionNames = [] {
  std::array<const char*, kNumConditions> a{};
  for (std::size_t i = 0; i < kNumConditions; ++i) a[i] = kConditions[i].name;
  return a;
}();

inline constexpr bool centers(condition c) { return kConditions[static_cast<std::size_t>(c)].centers; }
inline constexpr bool rotates(condition c) { return kConditions[static_cast<std::size_t>(c)].rotates; }
/// Whether the condition transforms K at all (every condition but plain).
inline constexpr bool transforms_k(condition c) { return centers(c) || rotates(c); }

/// Every condition's name in table order (the default of --conditions).
inline std::vector<std::string> all_condition_names() { return {kConditionNames.begin(), kConditionNames.end()}; }
/// Every condition's name in table order, joined by sep ("plain,rotate,center,center+rotate").
inline std::string condition_list(std::string_view sep) {
  std::string s;
  for (std::size_t i = 0; i < kNumConditions; ++i) (s += i ? sep : "") += kConditionNames[i];
  return s;
}
/// Returns the condition's name ("?" for a value outside the enum).
std::string_view condition_name(condition c);
/// Parses a condition name ("tile" is accepted as the legacy name of "plain"); an unknown name
/// fails, naming the known ones.
condition parse_condition(std::string_view text);

}  // namespace attnum::attention
