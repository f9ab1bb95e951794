#pragma once
// The self-contained HTML report: result tables, the synthetic illustration (precomputed by
// illustrate.h for every slider position) and the Vega / Vega-Lite / Vega-Embed runtime are
// inlined into one file, so the page works offline and makes no network request.
#include <nlohmann/json.hpp>

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "attnum/report/results.h"

namespace attnum::report {

/// The inlined browser runtime: the three minified scripts, read from a node_modules folder.
struct page_assets {
  std::filesystem::path node_modules;
  std::string vega, vega_lite, vega_embed;
};

/// Returns the node_modules folder holding vega/build/vega.min.js, vega-lite/build/
/// vega-lite.min.js and vega-embed/build/vega-embed.min.js: `override` when given (a
/// node_modules folder or a folder containing one), else $ATTNUM_ASSETS, else the first match
/// walking up from the executable, then <exe>/../share/attnum, then the source tree the tool was
/// built from; never the working directory.
/// Throws attnum::error naming every place tried (run `npm ci` in the source tree) otherwise.
std::filesystem::path find_assets(const std::optional<std::filesystem::path>& override);

/// Returns the three scripts read from `node_modules`. Throws attnum::error naming the file
/// unless each file's SHA-256 equals the one recorded when the tool was built.
page_assets load_assets(const std::filesystem::path& node_modules);

/// Returns the page's answer block: per summary row (kernel, transform), the heads harmed above
/// the noise floor and by sign, the predictor AUC with its interval, and per loss row of that
/// kernel and condition the perplexity ratio and the paired CE difference with plain, each with
/// its interval; `text` is the sentence shown, worded by the rules in docs/report.md (a
/// comparison word only when the interval excludes the reference value).
nlohmann::json answer(const result_set& rs);

/// Returns the JSON embedded in the page: tables, per-head details, the illustration.
nlohmann::json page_data(const result_set& rs);

/// Returns the page's Content-Security-Policy: no network, and only the given inline scripts
/// (by their SHA-256) may run.
std::string content_security_policy(const std::vector<std::string>& scripts);

/// Returns the whole HTML page.
std::string build_page(const result_set& rs, const page_assets& assets);

/// Reads the result folders, builds the page and writes it atomically to `out`.
void write_report(const std::vector<std::filesystem::path>& results, const std::filesystem::path& out,
                  const std::optional<std::filesystem::path>& assets);

/// Template parts (page_template.cpp).
const char* page_css();
const char* page_body();
const char* page_js();

}  // namespace attnum::report
