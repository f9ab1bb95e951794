#pragma once
// The one same-configuration check: results written by one run (checkpoints, shards, resumed
// folders) may only be combined with a run of the same configuration. Names each field that
// differs, down to the leaf ("kernels[0].qk_acc.bits: 24 -> 13"), so the user sees what changed.
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "attnum/core/error.h"
#include "attnum/core/file.h"

namespace attnum::core {

namespace detail {
// A value for a message: its JSON text, cut to `max_chars` with "...".
inline std::string short_dump(const nlohmann::json& v, size_t max_chars = 80) {
  std::string s = v.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (s.size() > max_chars) s = s.substr(0, max_chars - 3) + "...";
  return s;
}

// Appends "path: old -> new" for each leaf where `a` (stored) and `b` (this run) differ:
// objects are compared key by key (two of different "name"s by their names), arrays of equal
// length element by element, anything else (and anything deeper than `depth` levels) as a whole.
inline void config_diff(const nlohmann::json& a, const nlohmann::json& b, const std::string& path, int depth,
                        std::vector<std::string>& out) {
  if (a == b) return;
  // Two named things (a kernel spec) of different names: the names, not every field that follows.
  if (a.is_object() && b.is_object() && a.contains("name") && b.contains("name") && a["name"] != b["name"]) {
    out.push_back(clip(path) + ": " + short_dump(a["name"]) + " -> " + short_dump(b["name"]));
    return;
  }
  if (depth > 0 && a.is_object() && b.is_object()) {
    for (auto it = a.begin(); it != a.end(); ++it) {
      const std::string p = path.empty() ? it.key() : path + "." + it.key();
      if (!b.contains(it.key()))
        out.push_back(clip(p) + ": " + short_dump(it.value()) + " -> (none)");
      else
        config_diff(it.value(), b[it.key()], p, depth - 1, out);
    }
    for (auto it = b.begin(); it != b.end(); ++it)
      if (!a.contains(it.key()))
        out.push_back(clip(path.empty() ? it.key() : path + "." + it.key()) + ": (none) -> " + short_dump(it.value()));
    return;
  }
  if (depth > 0 && a.is_array() && b.is_array() && a.size() == b.size()) {
    for (size_t i = 0; i < a.size(); ++i) config_diff(a[i], b[i], path + "[" + std::to_string(i) + "]", depth - 1, out);
    return;
  }
  out.push_back(clip(path) + ": " + short_dump(a) + " -> " + short_dump(b));
}
}  // namespace detail

/// Throws attnum::error "<where>: the stored configuration differs from this run's in N fields
/// (stored -> this run): <path>: <stored> -> <current>; ...; <hint>" when any top-level field of
/// either differs (a field only one of them has included). Fields named in `ignore` are not
/// compared. At most 8 differences are listed, each value cut to 80 characters.
inline void require_same_config(const nlohmann::json& stored, const nlohmann::json& current, std::string_view where,
                                std::string_view hint, std::initializer_list<std::string_view> ignore = {}) {
  auto ignored = [&](const std::string& k) {
    for (auto i : ignore)
      if (k == i) return true;
    return false;
  };
  if (!stored.is_object())
    fail("{}: expected a JSON object of configuration fields, found {}; {}", where,
         stored.is_array() ? "an array" : detail::short_dump(stored), hint);
  if (!current.is_object()) {
    if (stored != current)
      fail("{}: the stored configuration {} differs from this run's {}; {}", where, detail::short_dump(stored),
           detail::short_dump(current), hint);
    return;
  }
  nlohmann::json a = nlohmann::json::object(), b = nlohmann::json::object();
  for (auto it = stored.begin(); it != stored.end(); ++it)
    if (!ignored(it.key())) a[it.key()] = it.value();
  for (auto it = current.begin(); it != current.end(); ++it)
    if (!ignored(it.key())) b[it.key()] = it.value();
  std::vector<std::string> diffs;
  detail::config_diff(a, b, "", 64, diffs);
  if (diffs.empty()) return;
  constexpr size_t kMax = 8;
  std::string list;
  for (size_t i = 0; i < diffs.size() && i < kMax; ++i) list += (i ? "; " : "") + diffs[i];
  if (diffs.size() > kMax) list += fmt::format("; and {} more", diffs.size() - kMax);
  fail("{}: the stored configuration differs from this run's in {} field{} (stored -> this run): {}; {}", where,
       diffs.size(), diffs.size() == 1 ? "" : "s", list, hint);
}

}  // namespace attnum::core
