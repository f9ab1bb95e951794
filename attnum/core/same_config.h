#pragma once
// The one same-configuration check: results written by one run (checkpoints, shards, resumed
// folders) may only be combined with a run of the same configuration. Names the first field that
// differs, so the user sees what changed.
#include <string_view>

#include <nlohmann/json.hpp>

#include "attnum/core/error.h"

namespace attnum::core {

/// Throws attnum::error "<where>: field '<key>' is <stored> but <this run> has <current>; <hint>"
/// for the first top-level field of `current` that `stored` lacks or holds with another value,
/// and for a field of `stored` that `current` lacks. Fields named in `ignore` are not compared.
inline void require_same_config(const nlohmann::json& stored, const nlohmann::json& current, std::string_view where,
                                std::string_view hint, std::initializer_list<std::string_view> ignore = {}) {
  auto ignored = [&](const std::string& k) {
    for (auto i : ignore)
      if (k == i) return true;
    return false;
  };
  for (auto it = current.begin(); it != current.end(); ++it)
    if (!ignored(it.key()) && (!stored.contains(it.key()) || stored[it.key()] != it.value()))
      fail("{}: field '{}' is {} but this run has {}; {}", where, it.key(), stored.value(it.key(), nlohmann::json()).dump(),
           it.value().dump(), hint);
  for (auto it = stored.begin(); it != stored.end(); ++it)
    if (!ignored(it.key()) && !current.contains(it.key()))
      fail("{}: field '{}' is {} but this run has none; {}", where, it.key(), it.value().dump(), hint);
}

}  // namespace attnum::core
