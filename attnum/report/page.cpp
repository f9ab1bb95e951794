// The self-contained HTML report (see page.h).
#include "attnum/report/page.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>

#include <fmt/core.h>

#include "attnum/attention/engine.h"
#include "attnum/core/error.h"
#include "attnum/core/file.h"
#include "attnum/core/version.h"
#include "attnum/report/illustrate.h"
#include "attnum/report/sha256.h"

namespace attnum::report {
namespace fs = std::filesystem;
namespace {

constexpr const char* kVega = "vega/build/vega.min.js";
constexpr const char* kVegaLite = "vega-lite/build/vega-lite.min.js";
constexpr const char* kVegaEmbed = "vega-embed/build/vega-embed.min.js";

bool has_assets(const fs::path& nm) {
  std::error_code ec;
  return fs::exists(nm / kVega, ec) && fs::exists(nm / kVegaLite, ec) && fs::exists(nm / kVegaEmbed, ec);
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

std::string key_part(const nlohmann::json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); }

std::string head_key(const nlohmann::json& row) {
  return key_part(row.value("model", nlohmann::json())) + "|" + key_part(row["layer"]) + "|" + key_part(row["head"]) +
         "|" + key_part(row.value("kernel", nlohmann::json()));
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
    std::stable_sort(names.begin(), names.end(),
                     [](const auto& a, const auto& b) { return condition_rank(a) < condition_rank(b); });
    nlohmann::json conds = nlohmann::json::array();
    for (const auto& n : names) {
      const cond& c = h.conds[n];
      nlohmann::json rel = nlohmann::json::array(), pred = nlohmann::json::array();
      for (const auto& t : h.texts) {
        rel.push_back(c.rel.count(t) ? nlohmann::json(c.rel.at(t)) : nlohmann::json());
        pred.push_back(c.pred.count(t) ? nlohmann::json(c.pred.at(t)) : nlohmann::json());
      }
      conds.push_back({{"condition", n},
                       {"rel_err", rel},
                       {"predicted_rel_err", pred},
                       {"geo", geo(c.rel)},
                       {"pred_geo", geo(c.pred)}});
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
    fail("--assets {}: vega, vega-lite and vega-embed builds not found there (expected {}, {}, {})", override->string(),
         kVega, kVegaLite, kVegaEmbed);
  }
  if (const char* env = std::getenv("ATTNUM_ASSETS"); env && *env) {
    if (check(env)) return env;
    if (check(fs::path(env) / "node_modules")) return fs::path(env) / "node_modules";
  }
  // Only the tool's own tree (the executable's folders, its install prefix, the source tree it
  // was built from): never the working directory, whose node_modules may be anyone's.
  std::vector<fs::path> starts;
  if (fs::path exe = self_exe(); !exe.empty()) starts.push_back(exe.parent_path());
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
  fail(
      "report: the Vega runtime ({}) was not found; run `npm ci` in the source tree or pass "
      "--assets NODE_MODULES. Tried:{}",
      kVega, where);
}

#ifndef ATTNUM_VEGA_SHA256
#define ATTNUM_VEGA_SHA256 ""
#define ATTNUM_VEGA_LITE_SHA256 ""
#define ATTNUM_VEGA_EMBED_SHA256 ""
#endif

namespace {
// An asset's bytes, refused unless their SHA-256 is the one recorded when the tool was built.
std::string checked_asset(const fs::path& nm, const char* name, std::string_view recorded) {
  const fs::path file = nm / name;
  const std::string bytes = read_file(file);
  if (recorded.empty())
    fail(
        "report: {}: no hash of the Vega runtime was recorded when attnum was built (node_modules "
        "was absent then): run `npm ci` in the source tree, then scripts/build",
        file.string());
  const std::string got = sha256_hex(bytes);
  if (got != recorded)
    fail(
        "report: {}: SHA-256 {} is not the {} recorded when attnum was built (a different or "
        "altered file; run `npm ci` in the source tree, or pass --assets with the pinned "
        "versions)",
        file.string(), got, recorded);
  return script_safe(bytes);
}
}  // namespace

page_assets load_assets(const fs::path& nm) {
  return {nm, checked_asset(nm, kVega, ATTNUM_VEGA_SHA256), checked_asset(nm, kVegaLite, ATTNUM_VEGA_LITE_SHA256),
          checked_asset(nm, kVegaEmbed, ATTNUM_VEGA_EMBED_SHA256)};
}

std::string content_security_policy(const std::vector<std::string>& scripts) {
  std::string hashes;
  for (const auto& s : scripts) hashes += " 'sha256-" + sha256_base64(s) + "'";
  // No network: everything is inline. Only these exact scripts may run; 'unsafe-eval' is needed
  // by Vega's expression compiler (new Function).
  return "default-src 'none'; script-src" + hashes +
         " 'unsafe-eval'; style-src 'unsafe-inline'; img-src data: blob:; connect-src 'none'";
}

namespace {
const nlohmann::json* number_of(const nlohmann::json& row, const char* key) {
  auto it = row.find(key);
  return it != row.end() && it->is_number() ? &*it : nullptr;
}
double as_double(const nlohmann::json* v) { return v->get<double>(); }

// "0.90 [0.78, 1.00]" with `digits` decimals; the interval only when both ends are numbers.
std::string with_interval(const nlohmann::json& row, const std::string& key, int digits) {
  const auto *v = number_of(row, key.c_str()), *lo = number_of(row, (key + "_lo").c_str()),
             *hi = number_of(row, (key + "_hi").c_str());
  std::string s = fmt::format("{:.{}f}", as_double(v), digits);
  if (lo && hi)
    s += fmt::format(" [{:.{}f}, {:.{}f}]", as_double(lo), digits, as_double(hi), digits);
  else if (row.contains(key + "_lo"))
    s += " [n/a]";  // a bound recorded as null: no interval
  return s;
}

// Where a value stands against `ref` by its interval: "above", "below" or "overlaps" (or
// "no interval"); the only basis for a word like "better" or "distinguishable" in the answer.
std::string verdict(const nlohmann::json& row, const std::string& key, double ref) {
  const auto *lo = number_of(row, (key + "_lo").c_str()), *hi = number_of(row, (key + "_hi").c_str());
  if (!lo || !hi) return "no interval";
  if (as_double(lo) > ref) return "above";
  if (as_double(hi) < ref) return "below";
  return "overlaps";
}
}  // namespace

nlohmann::json answer(const result_set& rs) {
  nlohmann::json out = nlohmann::json::array();
  if (!rs.summary) return out;
  for (const auto& r : rs.summary->rows) {
    const std::string kernel = key_part(r.value("kernel", nlohmann::json())),
                      transform = key_part(r.value("transform", nlohmann::json()));
    nlohmann::json a = {{"kernel", kernel}, {"transform", transform}};
    std::vector<std::string> parts;
    const auto *n = number_of(r, "n_heads"), *label = number_of(r, "n_label_harmed");
    const auto* sign = number_of(r, "n_harmed_sign") ? number_of(r, "n_harmed_sign") : number_of(r, "n_harmed");
    if (n) a["n_heads"] = *n;
    if (label) a["n_label_harmed"] = *label;
    if (sign) a["n_harmed_sign"] = *sign;
    if (n && label && sign)
      parts.push_back(fmt::format("{} of {} heads harmed above the noise floor ({} by sign alone)", label->dump(),
                                  n->dump(), sign->dump()));
    else if (n && sign)
      parts.push_back(
          fmt::format("{} of {} heads harmed by sign (no noise floor in these results)", sign->dump(), n->dump()));
    if (number_of(r, "auc")) {
      a["auc"] = r["auc"];
      for (const char* k : {"auc_lo", "auc_hi"})
        if (number_of(r, k)) a[k] = r[k];
      const std::string v = verdict(r, "auc", 0.5);
      a["auc_verdict"] = v;
      parts.push_back(fmt::format("predictor AUC {}{}", with_interval(r, "auc", 2),
                                  v == "above"      ? ", better than chance"
                                  : v == "below"    ? ", worse than chance"
                                  : v == "overlaps" ? ", not distinguishable from chance"
                                                    : " (no interval)"));
    } else {
      parts.push_back("no predictor AUC in the summary");
    }
    nlohmann::json loss = nlohmann::json::array();
    if (rs.loss)
      for (const auto& l : rs.loss->rows) {
        if (key_part(l.value("kernel", nlohmann::json())) != kernel ||
            key_part(l.value("condition", nlohmann::json())) != transform || !number_of(l, "ppl_ratio"))
          continue;
        const std::string model = key_part(l.value("model", nlohmann::json()));
        nlohmann::json e = {{"model", model}, {"ppl_ratio", l["ppl_ratio"]}};
        for (const char* k : {"ppl_ratio_lo", "ppl_ratio_hi"})
          if (number_of(l, k)) e[k] = l[k];
        std::string text =
            fmt::format("loss on {}: perplexity ratio to the reference {}", model, with_interval(l, "ppl_ratio", 3));
        if (rs.loss_paired)
          for (const auto& p : rs.loss_paired->rows) {
            if (key_part(p.value("kernel", nlohmann::json())) != kernel ||
                key_part(p.value("condition_a", nlohmann::json())) != transform ||
                key_part(p.value("condition_b", nlohmann::json())) != "plain" ||
                (p.contains("model") && key_part(p["model"]) != model) || !number_of(p, "delta_ce"))
              continue;
            const std::string v = verdict(p, "delta_ce", 0.0);
            e["delta_ce"] = p["delta_ce"];
            for (const char* k : {"delta_ce_lo", "delta_ce_hi"})
              if (number_of(p, k)) e[k] = p[k];
            e["delta_ce_verdict"] = v;
            text += fmt::format("; paired with plain, CE {} nats, {}", with_interval(p, "delta_ce", 4),
                                v == "above"      ? "worse than plain"
                                : v == "below"    ? "better than plain"
                                : v == "overlaps" ? "not distinguishable from plain"
                                                  : "no interval");
            break;
          }
        e["text"] = text;
        loss.push_back(std::move(e));
      }
    a["loss"] = loss;
    std::string text = kernel + ", " + transform + ": ";
    for (size_t i = 0; i < parts.size(); ++i) text += (i ? "; " : "") + parts[i];
    a["text"] = text;
    out.push_back(std::move(a));
  }
  return out;
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
          {"answer", answer(rs)},
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
  // Each inline script's exact text (its CSP hash covers every byte between the tags).
  auto body = [](std::string_view code) {
    std::string t;
    t.reserve(code.size() + 2);
    t.append(1, '\n').append(code).append(1, '\n');
    return t;
  };
  const std::vector<std::string> scripts = {body(a.vega), body(a.vega_lite), body(a.vega_embed), body(page_js())};
  html += "<meta http-equiv=\"Content-Security-Policy\" content=\"" + content_security_policy(scripts) + "\">\n";
  html += "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n";
  html += "<title>attention-numerics report</title>\n<style>\n";
  html += page_css();
  html += "</style>\n</head>\n<body>\n";
  html += page_body();
  html += "\n<script type=\"application/json\" id=\"attnum-data\">";
  html += json_safe(page_data(rs));
  html += "</script>\n";
  for (const auto& sc : scripts) html.append("<script>").append(sc).append("</script>\n");
  html += "</body>\n</html>\n";
  return html;
}

void write_report(const std::vector<fs::path>& results, const fs::path& out, const std::optional<fs::path>& assets) {
  const page_assets a = load_assets(find_assets(assets));  // fail before any work if absent
  const result_set rs = read_results(results);
  write_file_atomic(out, build_page(rs, a));
}

}  // namespace attnum::report
