// The self-contained HTML report (see page.h).
#include "attnum/report/page.h"


#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>

#include "attnum/attention/engine.h"
#include "attnum/core/error.h"
#include "attnum/core/file.h"
#include "attnum/core/version.h"
#include "attnum/report/illustrate.h"

namespace attnum::report {
namespace fs = std::filesystem;
namespace {

constexpr const char* kVega = "vega/build/vega.min.js";
constexpr const char* kVegaLite = "vega-lite/build/vega-lite.min.js";
constexpr const char* kVegaEmbed = "vega-embed/build/vega-embed.min.js";

bool has_assets(const fs::path& nm) {
  std::error_code ec;
  return fs::exists(nm / kVega, ec) && fs::exists(nm / kVegaLite, ec) &&
         fs::exists(nm / kVegaEmbed, ec);
}

// Makes script text safe inside <script>: only "</script" would end the element early (the
// minified Vega builds contain none today; "<\/script" means the same in strings and regexes).
std::string script_safe(std::string s) {
  for (size_t p = 0; (p = s.find("</", p)) != std::string::npos; p += 3) {
    std::string tag = s.substr(p + 2, 6);
    for (char& c : tag) c = char(std::tolower(static_cast<unsigned char>(c)));
    if (tag == "script") s.replace(p, 2, "<\\/");
  }
  return s;
}

// JSON embedded in <script type="application/json">: '<' only occurs inside JSON strings, where
// \u003c is the same character, so no markup can end the element.
std::string json_safe(const nlohmann::json& j) {
  std::string s = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  std::string out;
  out.reserve(s.size());
  for (char c : s) c == '<' ? out += "\\u003c" : out += c;
  return out;
}

std::string key_part(const nlohmann::json& v) {
  return v.is_string() ? v.get<std::string>() : v.dump();
}

std::string head_key(const nlohmann::json& row) {
  return key_part(row.value("model", nlohmann::json())) + "|" + key_part(row["layer"]) + "|" +
         key_part(row["head"]) + "|" + key_part(row.value("kernel", nlohmann::json()));
}

nlohmann::json table_json(const std::optional<table>& t) {
  if (!t) return nullptr;
  return {{"columns", t->columns}, {"rows", t->rows}, {"sources", t->sources}};
}

int condition_rank(const std::string& c) {
  for (int i = 0; i < 4; ++i)
    if (c == attention::kConditionNames[i]) return i;
  return 4;
}

// Per head (model, layer, head, kernel): per-text errors for each condition, and
// exp(mean_texts log1p(rel_err)) - 1, the error scale the observed score averages over.
nlohmann::json head_details(const table& rows) {
  struct cond {
    std::map<std::string, double> rel, pred;
  };
  struct head {
    std::vector<std::string> texts;
    std::map<std::string, cond> conds;
  };
  std::map<std::string, head> heads;
  for (const auto& r : rows.rows) {
    head& h = heads[head_key(r)];
    const std::string text = key_part(r["text"]);
    if (std::find(h.texts.begin(), h.texts.end(), text) == h.texts.end()) h.texts.push_back(text);
    cond& c = h.conds[key_part(r["condition"])];
    if (r["rel_err"].is_number()) c.rel[text] = r["rel_err"].get<double>();
    auto p = r.find("predicted_rel_err");
    if (p != r.end() && p->is_number()) c.pred[text] = p->get<double>();
  }
  auto geo = [](const std::map<std::string, double>& m) -> nlohmann::json {
    if (m.empty()) return nullptr;
    double s = 0;
    for (const auto& [t, v] : m) s += std::log1p(v);
    return std::expm1(s / double(m.size()));
  };
  nlohmann::json out = nlohmann::json::object();
  for (auto& [key, h] : heads) {
    std::vector<std::string> names;
    for (auto& [n, c] : h.conds) names.push_back(n);
    std::stable_sort(names.begin(), names.end(), [](const auto& a, const auto& b) {
      return condition_rank(a) < condition_rank(b);
    });
    nlohmann::json conds = nlohmann::json::array();
    for (const auto& n : names) {
      const cond& c = h.conds[n];
      nlohmann::json rel = nlohmann::json::array(), pred = nlohmann::json::array();
      for (const auto& t : h.texts) {
        rel.push_back(c.rel.count(t) ? nlohmann::json(c.rel.at(t)) : nlohmann::json());
        pred.push_back(c.pred.count(t) ? nlohmann::json(c.pred.at(t)) : nlohmann::json());
      }
      conds.push_back({{"condition", n}, {"rel_err", rel}, {"predicted_rel_err", pred},
                       {"geo", geo(c.rel)}, {"pred_geo", geo(c.pred)}});
    }
    out[key] = {{"texts", h.texts}, {"conditions", conds}};
  }
  return out;
}

fs::path self_exe() {
  std::error_code ec;
  fs::path p = fs::read_symlink("/proc/self/exe", ec);
  return ec ? fs::path() : p;
}

}  // namespace

fs::path find_assets(const std::optional<fs::path>& override) {
  std::vector<fs::path> tried;
  auto check = [&](const fs::path& p) {
    tried.push_back(p);
    return has_assets(p);
  };
  if (override) {
    if (check(*override)) return *override;
    if (check(*override / "node_modules")) return *override / "node_modules";
    fail("--assets {}: vega, vega-lite and vega-embed builds not found there (expected {}, {}, {})",
         override->string(), kVega, kVegaLite, kVegaEmbed);
  }
  if (const char* env = std::getenv("ATTNUM_ASSETS"); env && *env) {
    if (check(env)) return env;
    if (check(fs::path(env) / "node_modules")) return fs::path(env) / "node_modules";
  }
  std::vector<fs::path> starts;
  if (fs::path exe = self_exe(); !exe.empty()) starts.push_back(exe.parent_path());
  std::error_code ec;
  if (fs::path cwd = fs::current_path(ec); !ec) starts.push_back(cwd);
  for (const auto& s : starts)
    for (fs::path p = s; !p.empty(); p = p.parent_path()) {
      if (check(p / "node_modules")) return p / "node_modules";
      if (p == p.parent_path()) break;
    }
  if (!starts.empty() && check(starts[0] / ".." / "share" / "attnum" / "node_modules"))
    return starts[0] / ".." / "share" / "attnum" / "node_modules";
#ifdef ATTNUM_SOURCE_TREE
  // a build folder outside the source tree: the source tree's `npm ci` result
  if (check(fs::path(ATTNUM_SOURCE_TREE) / "node_modules")) return fs::path(ATTNUM_SOURCE_TREE) / "node_modules";
#endif
  std::string where;
  for (const auto& t : tried) where += "\n  " + t.string();
  fail("report: the Vega runtime ({}) was not found; run `npm ci` in the source tree or pass "
       "--assets NODE_MODULES. Tried:{}",
       kVega, where);
}

page_assets load_assets(const fs::path& nm) {
  return {nm, script_safe(read_file(nm / kVega)), script_safe(read_file(nm / kVegaLite)),
          script_safe(read_file(nm / kVegaEmbed))};
}

nlohmann::json page_data(const result_set& rs) {
  nlohmann::json ill = nlohmann::json::object();
  ill["commons"] = illustration_commons();
  ill["signs"] = illustration_signs();
  for (bool center : {false, true}) {
    nlohmann::json pos = nlohmann::json::array();
    for (double c : illustration_commons()) pos.push_back(illustration_json(illustrate(c, center)));
    ill[center ? "center" : "plain"] = pos;
  }
  std::optional<table> heads = rs.heads;
  if (heads) {  // inspector order: observed harm, largest first (missing scores last)
    auto& r = heads->rows;
    std::stable_sort(r.begin(), r.end(), [](const nlohmann::json& a, const nlohmann::json& b) {
      const auto &x = a["observed_score"], &y = b["observed_score"];
      if (!x.is_number() || !y.is_number()) return x.is_number() && !y.is_number();
      return x.get<double>() > y.get<double>();
    });
  }
  return {{"tool_version", std::string(tool_version())},
          {"dirs", rs.dirs},
          {"meta", rs.meta},
          {"absent", rs.absent},
          {"illustration", ill},
          {"heads", table_json(heads)},
          {"summary", table_json(rs.summary)},
          {"details", rs.rows ? head_details(*rs.rows) : nlohmann::json()},
          {"pcast_theory", table_json(rs.pcast_theory)},
          {"pcast_dp", table_json(rs.pcast_dp)},
          {"pcast_simulate", table_json(rs.pcast_simulate)},
          {"pcast_overflow", table_json(rs.pcast_overflow)},
          {"loss", table_json(rs.loss)},
          {"loss_paired", table_json(rs.loss_paired)}};
}

std::string build_page(const result_set& rs, const page_assets& a) {
  std::string html;
  html += "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
  // No network: everything is inline; the policy makes any stray request fail loudly.
  // 'unsafe-eval' is needed by Vega's expression compiler (new Function).
  html += "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
          "script-src 'unsafe-inline' 'unsafe-eval'; style-src 'unsafe-inline'; "
          "img-src data: blob:; connect-src 'none'\">\n";
  html += "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n";
  html += "<title>attention-numerics report</title>\n<style>\n";
  html += page_css();
  html += "</style>\n</head>\n<body>\n";
  html += page_body();
  html += "\n<script type=\"application/json\" id=\"attnum-data\">";
  html += json_safe(page_data(rs));
  html += "</script>\n<script>\n" + a.vega + "\n</script>\n<script>\n" + a.vega_lite +
          "\n</script>\n<script>\n" + a.vega_embed + "\n</script>\n<script>\n";
  html += page_js();
  html += "\n</script>\n</body>\n</html>\n";
  return html;
}

void write_report(const std::vector<fs::path>& results, const fs::path& out,
                  const std::optional<fs::path>& assets) {
  const page_assets a = load_assets(find_assets(assets));  // fail before any work if absent
  const result_set rs = read_results(results);
  write_file_atomic(out, build_page(rs, a));
}

}  // namespace attnum::report
