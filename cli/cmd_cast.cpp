// attnum cast: casts values to a number format and prints the code and the decoded value.
//   attnum cast --to FORMAT [--no-saturate] [--scale S] [--round MODE] [--json | -o FORMAT] VALUE...
#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <memory>

#include "attnum/core/error.h"
#include "attnum/formats/format.h"
#include "cli/command.h"
#include "cli/output_option.h"
#include "attnum/core/file.h"

namespace {
using namespace attnum::formats;

struct cast_args {
  std::string to;
  bool no_saturate = false;
  double scale = 1.0;
  std::string round = "rne";
  attnum::cli::output_flags output;
};

double parse_value(const std::string& text) {
  errno = 0;
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size())
    attnum::fail("cast: '{}' is not a number (expected a decimal or hex float such as 0.3, -1e-3, 0x1p-9, inf)",
                 attnum::clip(text));
  // ERANGE on underflow still gives the nearest double (a subnormal such as 4.9e-324, or 0):
  // a valid input. Overflow is refused rather than read as inf.
  if (errno == ERANGE && std::isinf(v))
    attnum::fail("cast: '{}' is outside the range of a double (write inf for infinity)", attnum::clip(text));
  return v;
}

rounding parse_rounding(const std::string& text) {
  if (text == "rne" || text == "nearest_even") return rounding::nearest_even;
  if (text == "away" || text == "half_away") return rounding::half_away;
  if (text == "rz" || text == "toward_zero") return rounding::toward_zero;
  attnum::fail("cast: --round '{}': expected rne, away or rz", attnum::clip(text));
}

nlohmann::ordered_json number_or_text(double v) {
  if (std::isfinite(v)) return v;
  return std::isnan(v) ? "nan" : (v > 0 ? "inf" : "-inf");
}

void run(const cast_args& a, const std::vector<std::string>& values) {
  const format f = parse_format(a.to);
  if (f == format::fp32) attnum::fail("cast: --to fp32 is the identity; expected e4m3fn, e5m2, bf16, fp16 or int8");
  if (!(a.scale > 0) || !std::isfinite(a.scale))
    attnum::fail("cast: --scale {}: expected a positive finite number", a.scale);
  if (values.empty()) attnum::fail("cast: no VALUE given");
  const rounding r = parse_rounding(a.round);
  const int hex_digits = info(f).bits / 4;
  std::vector<double> xs;
  for (const auto& v : values) xs.push_back(parse_value(v));  // all or nothing: no partial output
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  const bool json_rows = a.output.format() != attnum::io::output_format::table;
  std::string text;
  for (size_t i = 0; i < xs.size(); ++i) {
    // A scaled cast: x / S on the format's grid, standing for code * S (one rounding, in double).
    const uint32_t code = encode(f, xs[i] / a.scale, r, !a.no_saturate);
    const double decoded = decode(f, code) * a.scale;
    const std::string hex = fmt::format("0x{:0{}x}", code, hex_digits);
    if (json_rows) {
      rows.push_back({{"input", number_or_text(xs[i])}, {"code", hex}, {"decoded", number_or_text(decoded)}});
    } else {
      text += fmt::format("{} {} {:.9g}\n", values[i], hex, decoded);
    }
  }
  if (!attnum::cli::print_output(a.output, rows)) fmt::print("{}", text);
}

void setup(CLI::App& app) {
  auto a = std::make_shared<cast_args>();
  app.add_option("--to", a->to, "Target format: e4m3fn, e5m2, bf16, fp16, int8")->required();
  app.add_flag("--no-saturate", a->no_saturate,
               "Overflow to Inf (e5m2, bf16, fp16) or NaN (e4m3fn) instead of clamping to the max");
  app.add_option("--scale", a->scale, "Scaled cast: encode VALUE/S; decoded is code value * S")->capture_default_str();
  app.add_option("--round", a->round, "Rounding: rne (default), away (half away from zero), rz");
  attnum::cli::add_output_options(app, a->output, "Print a JSON array of {input, code, decoded}");
  // VALUEs are taken from the extras so that negative numbers (-1e-3, -.5, -inf) are values,
  // never flags; anything that is not a number is reported by name.
  app.allow_extras();
  app.footer("VALUE...: numbers, parsed as double and rounded once (no detour through float).");
  app.callback([a, &app] { run(*a, app.remaining()); });
}
}  // namespace
ATTNUM_COMMAND("cast", "Cast values to a number format: code and decoded value", setup);
