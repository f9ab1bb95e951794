#pragma once
// The knob table: one row per `--knob` name, the one place that says how a kernel_spec knob is
// named, read, printed, range-checked and when the spec's path reads it. apply_knobs, to_json
// and the range and "not read here" checks are all driven by it (kernel_spec_json.cpp); the
// knob list of docs/kernels.md ("Knobs") is tested against it.
//
// to_json's fields that are not knobs are listed next to it (non_knob_fields): everything else
// to_json prints is a row of this table, and every row is printed, so the resume check (which
// compares to_json of the specs) sees every knob.
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "attnum/attention/kernel_spec.h"

namespace attnum::attention {

/// One knob of a kernel_spec.
struct knob {
  /// As `--knob` and `attnum kernels --json` spell it: "p_scale", or "group.field" for a field
  /// of a nested JSON object ("q.fmt", "qk_acc.kind", "enabled.p_cast").
  std::string name;
  /// The values it takes where they are a fixed list (enums and booleans), in the order error
  /// messages list them; empty for numbers and the SFU units ("ieee" or "table:PATH").
  std::vector<std::string> choices;
  /// When the spec's path reads it, as docs/kernels.md writes it: "" (always), "only with COND"
  /// (setting it is refused otherwise) or "true needs COND" (setting it true is refused otherwise).
  std::string read_when;
  /// Setting it drops the preset's per-head-dim `tiles` (block_m and block_n then apply to every
  /// head dim).
  bool replaces_tiles = false;
  /// The value to_json prints for it.
  std::function<nlohmann::json(const kernel_spec&)> print;
  /// Sets it from `--knob`'s text; throws attnum::error naming the knob on a bad value.
  std::function<void(kernel_spec&, std::string_view text)> parse;
  /// Range check of the spec's value (empty: every parsed value is in range); throws
  /// attnum::error naming the knob.
  std::function<void(const kernel_spec&)> check;
  /// Why the spec's path does not read it ("" when it does); from read_when.
  std::function<std::string(const kernel_spec&)> unused;
};

/// Every knob, in the order the range checks run (the first failing one is reported).
const std::vector<knob>& knob_table();
/// The row named `name`, or null.
const knob* find_knob(std::string_view name);

/// A field of to_json that is not a knob, and how it is handled instead.
struct non_knob_field {
  const char* name;
  const char* handling;
};
/// to_json's fields that are not knobs: name, description, source_commit, tiles and
/// rescale_before_pv (recorded only; `--knob rescale_before_pv=...` is refused).
const std::vector<non_knob_field>& non_knob_fields();

}  // namespace attnum::attention
