#pragma once
// One field of a result row type R, for the field lists that write each row type from one place
// (study/rows.cpp, loss/rows.cpp; as llama-bench keeps one field list per printed row type): its
// name, how it is written and, for rows read back, how it is read.
#include <string>

#include <nlohmann/json.hpp>

#include "attnum/core/version.h"

namespace attnum::io {

template <typename R>
struct row_field {
  const char* name;
  nlohmann::json (*get)(const R&);
  void (*set)(R&, const nlohmann::json&) = nullptr;  ///< null: the field is not read back
  bool transfer_only = false;                        ///< a column of transfer studies only
  bool optional = false;                             ///< may be absent when read back (older checkpoints)
  bool version = false;                              ///< in the result files, not in the checkpoints
};

/// The tool version as every row type writes it.
inline nlohmann::json tool_version_json() { return std::string(tool_version()); }

}  // namespace attnum::io
