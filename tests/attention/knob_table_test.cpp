// The knob table (attention/knob_table.h) against what uses it: to_json prints exactly the
// table's knobs plus the named non-knob fields; every knob's printed value sets it back to the
// same spec through apply_knobs; changing any knob changes to_json at that knob's field and
// nowhere else (the resume check compares to_json, so it sees every knob); and docs/kernels.md's
// knob list names the same knobs, values and read conditions.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <bit>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "attention/doc_tables.h"
#include "attnum/attention/kernel_spec.h"
#include "attnum/attention/knob_table.h"
#include "attnum/core/error.h"
#include "attnum/formats/sfu_unit.h"

namespace attnum::attention {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

// Every preset, and the fp64 reference spec --kernel fp64 resolves to.
std::vector<std::pair<std::string, kernel_spec>> all_specs() {
  std::vector<std::pair<std::string, kernel_spec>> out;
  for (const auto& n : preset_names()) out.emplace_back(n, resolve_kernel(n));
  out.emplace_back("fp64", resolve_kernel("fp64"));
  return out;
}

// to_json's fields by dotted name: a nested object's fields as "group.field"; anything else
// (arrays included) as its own key.
std::map<std::string, json> flatten(const json& j) {
  std::map<std::string, json> out;
  for (const auto& [key, value] : j.items()) {
    if (value.is_object())
      for (const auto& [sub, v] : value.items()) out[key + "." + sub] = v;
    else
      out[key] = value;
  }
  return out;
}

// The `--knob` text of a printed value.
std::string text_of(const json& v) {
  if (v.is_string()) return v.get<std::string>();
  return v.dump();
}

std::set<std::string> table_names() {
  std::set<std::string> names;
  for (const knob& k : knob_table()) names.insert(k.name);
  return names;
}

std::set<std::string> non_knob_names() {
  std::set<std::string> names;
  for (const auto& f : non_knob_fields()) names.insert(f.name);
  return names;
}

// Keys whose values differ between two flattened to_json outputs.
std::set<std::string> changed_fields(const std::map<std::string, json>& a, const std::map<std::string, json>& b) {
  std::set<std::string> keys;
  for (const auto& [k, v] : a)
    if (!b.count(k) || b.at(k) != v) keys.insert(k);
  for (const auto& [k, v] : b)
    if (!a.count(k)) keys.insert(k);
  return keys;
}

TEST(knob_table_test, to_json_prints_every_knob_and_only_the_named_non_knob_fields) {
  ASSERT_EQ(table_names().size(), knob_table().size()) << "a knob name appears twice";
  for (const auto& n : non_knob_names())
    EXPECT_EQ(find_knob(n), nullptr) << n << " is both a knob and a non-knob field";
  for (const auto& [preset_name, spec] : all_specs()) {
    const auto fields = flatten(to_json(spec));
    for (const knob& k : knob_table())
      EXPECT_TRUE(fields.count(k.name)) << preset_name << ": knob " << k.name << " not in to_json";
    for (const auto& n : non_knob_names())
      EXPECT_TRUE(fields.count(n)) << preset_name << ": " << n << " not in to_json";
    for (const auto& [name, value] : fields)
      EXPECT_TRUE(find_knob(name) || non_knob_names().count(name))
          << preset_name << ": to_json field " << name << " is neither a knob nor a listed non-knob field";
  }
}

TEST(knob_table_test, every_knob_round_trips_through_its_printed_value) {
  for (const auto& [preset_name, spec] : all_specs()) {
    const json before = to_json(spec);
    const auto fields = flatten(before);
    for (const knob& k : knob_table()) {
      const std::string assignment = k.name + "=" + text_of(fields.at(k.name));
      if (const auto why = k.unused(spec); !why.empty()) {
        // The path does not read it: --knob refuses it; the row's parse still round-trips.
        try {
          apply_knobs(spec, {assignment});
          ADD_FAILURE() << preset_name << ": " << assignment << " accepted though " << why;
        } catch (const error& e) {
          EXPECT_NE(std::string(e.what()).find("does not use it: " + why), std::string::npos) << e.what();
        }
        kernel_spec again = spec;
        k.parse(again, text_of(fields.at(k.name)));
        EXPECT_EQ(to_json(again), before) << preset_name << ": " << assignment;
        continue;
      }
      const kernel_spec again = apply_knobs(spec, {assignment});
      json after = to_json(again), expected = before;
      if (k.replaces_tiles) {  // the knob drops the per-head-dim tiles; the rest is the same
        EXPECT_TRUE(again.tiles.empty()) << preset_name << ": " << assignment;
        after.erase("tiles");
        expected.erase("tiles");
      }
      EXPECT_EQ(after, expected) << preset_name << ": " << assignment;
    }
  }
}

// Minimal valid tables of each SFU unit, for the exp2_unit / rcp_unit / div_unit knobs.
struct unit_tables {
  fs::path dir = fs::temp_directory_path() / ("knob_table_test." + std::to_string(::getpid()));
  std::vector<std::string> values;
  unit_tables() {
    fs::create_directories(dir);
    const std::pair<formats::sfu_kind, formats::sfu_rule> units[] = {
        {formats::sfu_kind::ex2, formats::sfu_rule::ex2_frac},
        {formats::sfu_kind::rcp, formats::sfu_rule::rcp_mant},
        {formats::sfu_kind::div, formats::sfu_rule::div_ieee}};
    for (const auto& [kind, rule] : units) {
      formats::sfu_table t;
      t.kind = kind, t.rule = rule, t.bits = 0;
      if (rule != formats::sfu_rule::div_ieee) t.entries = {std::bit_cast<uint32_t>(1.0f)};
      const auto path = (dir / (std::string(formats::sfu_kind_name(kind)) + ".tbl")).string();
      formats::write_sfu_table(path, t);
      values.push_back("table:" + path);
    }
  }
  ~unit_tables() { fs::remove_all(dir); }
};

// Values to try instead of `current`: the other choices, or numbers near it.
std::vector<std::string> other_values(const knob& k, const json& current, const unit_tables& units) {
  std::vector<std::string> out;
  if (!k.choices.empty()) {
    for (const auto& c : k.choices)
      if (c != text_of(current)) out.push_back(c);
  } else if (current.is_string() && (current == "ieee" || text_of(current).rfind("table:", 0) == 0)) {
    out = units.values;
    out.push_back("ieee");
  } else if (current.is_string()) {  // mask_value's -inf
    out = {"-5e6", "-1"};
  } else if (current.is_number_integer()) {
    const long long x = current.get<long long>();
    for (long long v : {x + 1, x - 1, 2 * x, 1LL, 2LL, 4LL, 8LL}) out.push_back(std::to_string(v));
  } else {
    const double x = current.get<double>();
    for (double v : {2 * x, x / 2, x + 1, 1.0}) out.push_back(json(v).dump());
    out.push_back("-inf");
  }
  std::erase(out, text_of(current));
  return out;
}

// Sets knob `k` of `spec` to each other value that apply_knobs accepts, expecting to_json to
// change at k's field and nowhere else (tiles aside where k replaces them); returns how many.
int expect_changes(const std::string& what, const kernel_spec& spec, const knob& k, const unit_tables& units) {
  const auto before = flatten(to_json(spec));
  int accepted = 0;
  for (const auto& value : other_values(k, before.at(k.name), units)) {
    kernel_spec s;
    try {
      s = apply_knobs(spec, {k.name + "=" + value});
    } catch (const error&) {
      continue;  // not valid for this spec (out of range, or not read by its path)
    }
    std::set<std::string> expected{k.name};
    if (k.replaces_tiles && !spec.tiles.empty()) expected.insert("tiles");
    EXPECT_EQ(changed_fields(before, flatten(to_json(s))), expected) << what << ": " << k.name << "=" << value;
    ++accepted;
  }
  return accepted;
}

TEST(knob_table_test, changing_any_knob_changes_to_json_at_that_knob_only) {
  const unit_tables units;
  std::map<std::string, int> changed;  // knob -> accepted changes over all specs
  const auto specs = all_specs();
  for (const auto& [preset_name, spec] : specs)
    for (const knob& k : knob_table()) changed[k.name] += expect_changes(preset_name, spec, k, units);
  // A knob that no preset's path reads is changed on a preset with one other knob set to one of
  // its choices first (v.block_rows after v.gran=block), and if need be one more knob set to
  // another value (v.group_div after v.gran=row_group and v.block_rows=1: no preset scales V by
  // row groups). Knobs of k's own group (v.*) are tried first.
  for (const knob& k : knob_table()) {
    if (changed[k.name] > 0) continue;
    const auto group = [](const knob& x) { return x.name.substr(0, x.name.find('.')); };
    std::vector<const knob*> order;
    for (const knob& x : knob_table()) order.push_back(&x);
    std::stable_partition(order.begin(), order.end(), [&](const knob* x) { return group(*x) == group(k); });
    for (const auto& [preset_name, spec] : specs)
      for (const knob* other_p : order)
        for (const auto& choice : other_p->choices) {
          const knob& other = *other_p;
          if (changed[k.name] > 0 || &other == &k) continue;
          kernel_spec base = spec;
          other.parse(base, choice);
          const std::string what = preset_name + " with " + other.name + "=" + choice;
          changed[k.name] += expect_changes(what, base, k, units);
          for (const knob* third_p : order) {
            const knob& third = *third_p;
            if (changed[k.name] > 0 || &third == &k || &third == &other) continue;
            for (const auto& value : other_values(third, flatten(to_json(base)).at(third.name), units)) {
              kernel_spec base2 = base;
              try {
                third.parse(base2, value);
              } catch (const error&) {
                continue;  // a unit table of another kind
              }
              changed[k.name] += expect_changes(what + ", " + third.name + "=" + value, base2, k, units);
              if (changed[k.name] > 0) break;
            }
          }
        }
  }
  for (const knob& k : knob_table())
    EXPECT_GT(changed[k.name], 0) << k.name << " was never changed through apply_knobs";
}

// docs/kernels.md "## Knobs": one table row per knob, `name` | values | read | what it sets. The
// values cell lists a knob's choices (each in backticks, in the table's order) where it has a
// fixed list; the read cell is the table's read_when ("always" when empty), backticks aside.
TEST(knob_table_test, kernels_md_knob_list_matches_the_table) {
  const auto section = test::read_doc_section("docs/kernels.md", "## Knobs");
  ASSERT_TRUE(section.found) << "no '## Knobs' section in docs/kernels.md";
  ASSERT_FALSE(section.rows.empty()) << "no table in docs/kernels.md's Knobs section";
  std::set<std::string> documented;
  for (const auto& row : section.rows) {
    ASSERT_GE(row.size(), 3u);
    const auto names = test::backticked(row[0]);
    ASSERT_EQ(names.size(), 1u) << row[0];
    const std::string& name = names[0];
    EXPECT_TRUE(documented.insert(name).second) << name << " listed twice";
    const knob* k = find_knob(name);
    if (!k) {
      ADD_FAILURE() << "docs/kernels.md lists " << name << ", not a knob";
      continue;
    }
    if (!k->choices.empty()) {
      EXPECT_EQ(test::backticked(row[1]), k->choices) << name;
    }
    std::string read = row[2];
    std::erase(read, '`');
    EXPECT_EQ(read, k->read_when.empty() ? "always" : k->read_when) << name;
  }
  for (const knob& k : knob_table()) EXPECT_TRUE(documented.count(k.name)) << k.name << " missing from docs/kernels.md";
  for (const auto& f : non_knob_fields())
    EXPECT_NE(section.text.find(std::string("`") + f.name + "`"), std::string::npos)
        << "the non-knob field " << f.name << " is not named in docs/kernels.md's Knobs section";
}

}  // namespace
}  // namespace attnum::attention
