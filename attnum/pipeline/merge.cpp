#include "attnum/pipeline/merge.h"

#include <fstream>
#include <sstream>

#include "attnum/core/error.h"
#include "attnum/pipeline/distributed.h"
#include "attnum/study/head_study.h"

namespace fs = std::filesystem;

namespace attnum::pipeline {
namespace {

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) fail("merge: cannot read '{}'", p.string());
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void merge_heads(const std::vector<fs::path>& dirs, const fs::path& out) {
  const study::plan p = study::read_plan(dirs[0]);
  const std::string config = slurp(dirs[0] / "checkpoints" / "study.json");
  for (const auto& d : dirs)
    if (slurp(d / "checkpoints" / "study.json") != config)
      fail("merge: '{}' is a different head study than '{}' (checkpoints/study.json differs)",
           d.string(), dirs[0].string());
  study::write_plan(out, p);
  for (const auto& u : p.units) {
    if (study::read_unit(out, u.index)) continue;
    bool found = false;
    for (const auto& d : dirs) {
      if (!study::read_unit(d, u.index)) continue;
      study::write_atomic(study::unit_path(out, u.index), slurp(study::unit_path(d, u.index)));
      found = true;
      break;
    }
    if (!found)
      fail("merge: unit {} (model {}, layer {}, text {}) is in none of the folders: run its shard",
           u.index, u.model, u.layer, u.text);
  }
  study::assemble(p, out);
}

}  // namespace

std::string merge_folders(const std::vector<fs::path>& dirs, const fs::path& out) {
  if (dirs.empty()) fail("merge: no folders given");
  const bool heads = fs::exists(dirs[0] / "checkpoints" / "study.json");
  const bool loss = fs::exists(dirs[0] / "checkpoints" / "loss-params.json");
  if (!heads && !loss)
    fail("merge: '{}' holds neither checkpoints/study.json (attnum heads --out) nor "
         "checkpoints/loss-params.json (attnum loss --out)", dirs[0].string());
  for (const auto& d : dirs)
    if (fs::exists(d / "checkpoints" / (heads ? "study.json" : "loss-params.json")) == false)
      fail("merge: '{}' is not a {} folder like '{}'", d.string(), heads ? "head-study" : "loss",
           dirs[0].string());
  if (heads) {
    merge_heads(dirs, out);
    return "head study";
  }
  merge_loss(dirs, out);
  return "loss study";
}

}  // namespace attnum::pipeline
