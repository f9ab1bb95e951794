#pragma once
// The one same-configuration check: results written by one run (checkpoints, shards, resumed
// folders) may only be combined with a run of the same configuration. Names the first field that
// differs, so the user sees what changed.
#include <string_view>

#include <nlohmann/json.hpp>

#include "attnum/core/error.h"
#include "attnum/core/file.h"

namespace attnum::core {

/// Throws attnum::error "<where>: field '<key>' is <stored> but <this run> has <current>; <hint>"
/// for the first top-level field of `current` that `stored` lacks or holds with another value,
/// and for a field of `stored` that `current` lacks. Fields named in `ignore` are not compared.
/// `stored` is not an object: refused naming `where`. Values are quoted clipped (attnum::clip);
/// the comparison recurses at most as deep as the values (read_json bounds a file's depth).
inline void require_same_config(const nlohmann::json& stored, const nlohmann::json& current, std::string_view where,
                                std::string_view hint, std::initializer_list<std::string_view> ignore = {}) {
  auto ignored = [&](const std::string& k) {
    for (auto i : ignore)
      if (k == i) return true;
    return false;
  };
  if (!stored.is_object())
    fail("{}: expected a JSON object of configuration fields, found {}; {}", where,
         stored.is_array() ? "an array" : clip(stored.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)), hint);
  auto q = [](const nlohmann::json& v) { return clip(v.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)); };
  for (auto it = current.begin(); it != current.end(); ++it)
    if (!ignored(it.key()) && (!stored.contains(it.key()) || stored[it.key()] != it.value()))
      fail("{}: field '{}' is {} but this run has {}; {}", where, it.key(), q(stored.value(it.key(), nlohmann::json())),
           q(it.value()), hint);
  for (auto it = stored.begin(); it != stored.end(); ++it)
    if (!ignored(it.key()) && !current.contains(it.key()))
      fail("{}: field '{}' is {} but this run has none; {}", where, clip(it.key()), q(it.value()), hint);
}

}  // namespace attnum::core
