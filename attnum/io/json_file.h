#pragma once
// JSON files (config.json, tokenizer.json, shard and checkpoint files): read whole, parsed, and
// every failure names the file.
#include <cstdint>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "attnum/core/error.h"

namespace attnum::io {

/// Returns the parsed content of a JSON file: attnum::read_json (regular files only, never
/// blocking; at most kMaxJsonBytes and kMaxJsonDepth levels). Throws attnum::error "PATH:
/// cannot read: ..." or "PATH: not valid JSON: ...".
nlohmann::json read_json_file(const std::filesystem::path& path);

/// Returns a short description of a JSON value for error messages: scalars as JSON text (at most
/// 80 characters), arrays and objects by kind and size, never their (possibly deeply nested or
/// huge) content.
std::string json_brief(const nlohmann::json& v);

namespace detail {
template <typename T>
struct int_vector : std::false_type {};
template <typename E, typename A>
struct int_vector<std::vector<E, A>> : std::bool_constant<std::is_integral_v<E> && !std::is_same_v<E, bool>> {};
}  // namespace detail

/// Reads a value read back from a file into v, as j.get_to(v) does, except that an integer must be
/// a JSON integer within T's range (nlohmann converts a float or an out-of-range number with a C++
/// cast: undefined behaviour) and an array of them likewise. Throws attnum::error "WHAT = VALUE:
/// expected ..." (a wrong type for other T: nlohmann's type_error, as get_to).
template <typename T>
void json_get(const nlohmann::json& j, T& v, std::string_view what) {
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    using lim = std::numeric_limits<T>;
    const bool in_range = j.is_number_unsigned()  ? std::in_range<T>(j.get<uint64_t>())
                          : j.is_number_integer() ? std::in_range<T>(j.get<int64_t>())
                                                  : false;
    if (!in_range)
      fail("{} = {}: expected an integer in [{}, {}]", what, json_brief(j), static_cast<int64_t>(lim::min()),
           static_cast<uint64_t>(lim::max()));
    v = j.is_number_unsigned() ? static_cast<T>(j.get<uint64_t>()) : static_cast<T>(j.get<int64_t>());
  } else if constexpr (detail::int_vector<T>::value) {
    if (!j.is_array()) fail("{} = {}: expected an array of integers", what, json_brief(j));
    v.resize(j.size());
    for (size_t i = 0; i < j.size(); ++i) json_get(j[i], v[i], what);
  } else {
    j.get_to(v);
  }
}

}  // namespace attnum::io
