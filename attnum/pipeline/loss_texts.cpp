#include "attnum/pipeline/loss_texts.h"

#include <filesystem>
#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "attnum/core/error.h"
#include "attnum/core/file.h"
#include "attnum/model/loader.h"
#include "attnum/loss/reference_logits.h"
#include "attnum/pipeline/distributed.h"
#include "attnum/scaleout/layers.h"
#include "attnum/scaleout/world.h"

namespace attnum::pipeline {

loss_outcome run_loss_request(const loss_request& r) {
  using namespace attnum::model;
  using namespace attnum::loss;
  const auto& world = scaleout::here();
  const bool mpi = world.size > 1;
  if (!r.texts.empty() && !r.token_ids.empty()) fail("loss: give --text or --token-ids, not both");
  if (r.kernels.empty()) fail("loss: no kernel given");
  if (!r.save_reference.empty() && !r.reference_file.empty())
    fail("loss: give --save-reference or --reference-file, not both (a saved reference is used at once)");
  if (!r.save_reference.empty() && (!r.shard.empty() || mpi))
    fail(
        "loss --save-reference runs in one process: save the reference logits once, then give --reference-file "
        "to the {}",
        mpi ? "ranks" : "shards");
  if (r.pipeline_layers && (!r.save_reference.empty() || !r.reference_file.empty() || !r.shard.empty()))
    fail(
        "loss --pipeline-layers: --save-reference, --reference-file and --shard are not supported with it (a "
        "rank holds only its layers, and a reference file names the whole model's weights)");
  // Flags first: a bad flag is refused before the model is read.
  {  // nothing the run writes is equal to or inside what it reads
    std::vector<std::filesystem::path> in{r.model, r.tokenizer, r.reference_file};
    in.insert(in.end(), r.texts.begin(), r.texts.end());
    in.insert(in.end(), r.token_ids.begin(), r.token_ids.end());
    require_out_outside_inputs(r.out, in);
    if (!r.save_reference.empty()) require_out_outside_inputs(r.save_reference, in, "--save-reference");
  }
  loss_params p;
  p.n_tokens = r.tokens, p.windows = r.windows, p.kernel = r.kernels.front(), p.knobs = r.knobs;
  p.rotation = r.rotation;
  p.conditions = r.conditions;
  p.reference = r.reference;
  if (p.reference != "bf16" && p.reference != "fp64")
    fail("--reference: expected bf16 or fp64, got '{}'", clip(p.reference));
  check_linear_precision(r.linear);
  // Under --pipeline-layers each rank reads only its layers (rank 0 the embeddings, the last rank
  // the final norm and the classifier).
  weights w = r.pipeline_layers ? scaleout::load_my_layers(r.model, true) : load_model(r.model);
  if (r.pipeline_layers) p.forward = scaleout::forward_pipeline_shared;
  p.linear = resolve_linear_precision(r.linear, w);
  // Windows longer than the model's context are clamped to it, as attnum study does.
  if (w.cfg.seq_len > 0 && p.n_tokens > w.cfg.seq_len) {
    if (r.notices && world.root())
      fmt::print(stderr, "loss: {} tokens exceed {}'s context of {}: using windows of {}\n", p.n_tokens, w.id,
                 w.cfg.seq_len, w.cfg.seq_len);
    p.n_tokens = w.cfg.seq_len;
  }
  if (!r.token_ids.empty()) {
    for (const auto& f : r.token_ids) p.sources.push_back(read_token_ids(f)), p.source_names.push_back(f);
  } else {
    auto tok = load_tokenizer(r.model, w, r.tokenizer);
    for (const auto& f : r.texts.empty() ? default_texts() : r.texts)
      p.sources.push_back(tokenize_file(f, *tok, w)), p.source_names.push_back(f);
  }
  validate(p, w);
  // Refused up front when the weights and the loss's activations cannot fit (docs/model.md).
  check_memory(w, p.linear, loss_activation_bytes(w.cfg, p.n_tokens, !r.reference_file.empty()),
               fmt::format("loss: {} with windows of {} tokens", w.id, p.n_tokens));
  prepare_weights(w, p.linear);
  // The reference file is checked against the weights as the forward uses them (rounded).
  if (!r.reference_file.empty()) {
    try {
      p.reference_file = reference_logits::open(r.reference_file, w, p);
    } catch (const error& e) {
      fail("--reference-file {}", e.what());
    }
    // Every window of the run must be in the file: checked before any work.
    for (int s = 0; s < int(p.sources.size()); ++s)
      for (int k = 0; k < p.windows; ++k)
        (void)p.reference_file->find(window_inputs(p, s, k), fmt::format("{} window {}", p.source_names[s], k));
  }

  loss_outcome o;
  o.model_id = w.id, o.n_tokens = p.n_tokens;
  if (!r.shard.empty()) {
    // A job-array shard: compute this shard's units and write them for a later merge.
    const auto sh = scaleout::parse_shard(r.shard);
    if (r.out.empty()) fail("--shard needs --out DIR");
    if (mpi) fail("--shard and mpirun do not combine");
    if (r.kernels.size() != 1) fail("loss --shard: give one --kernel per shard run, got {}", r.kernels.size());
    const auto units = shard_units(p, sh.index, sh.count);
    output_guard guard(r.out);  // docs/reliability.md: a failed run leaves --out as it was
    begin_output_dir(r.out);
    const nlohmann::json j = shard_to_json(p, w.id, sh.index, sh.count, compute_units(w, p, units));
    write_shard_file(r.out, sh.index, sh.count, j);
    write_complete_marker(r.out, r.command.empty() ? fmt::format("attnum loss --shard {}", r.shard) : r.command);
    guard.commit();
    o.shard_units = int(units.size());
    return o;
  }
  if (!r.save_reference.empty()) {
    // Computed once for every kernel and condition, written, and then read back like any
    // reference file: the numbers below come from the saved logits.
    const int n = save_reference_logits(r.save_reference, w, p, r.progress);
    p.reference_file = reference_logits::open(r.save_reference, w, p);
    if (r.notices)
      fmt::print(stderr, "loss: reference logits of {} windows saved to {} (reuse them with --reference-file)\n", n,
                 r.save_reference);
  }
  output_guard guard(world.root() ? r.out : std::string());
  if (!r.out.empty() && world.root()) begin_output_dir(r.out);
  // Several kernels: one run each, checkpointed under DIR/KERNEL; rows in the order given.
  for (const auto& spec : r.kernels) {
    p.kernel = spec;
    const std::string dir = r.kernels.size() > 1 && !r.out.empty() ? r.out + "/" + spec.name : r.out;
    std::vector<paired_row> paired;
    const auto rows = run_loss(w, p, w.id, dir, 0, 1, r.progress, &paired, r.pipeline_layers);
    o.rows.insert(o.rows.end(), rows.begin(), rows.end());
    o.paired.insert(o.paired.end(), paired.begin(), paired.end());
  }
  if (!world.root()) return o;
  if (!r.out.empty()) {
    write_loss_files(r.out, o.rows);
    if (!o.paired.empty()) write_paired_files(r.out, o.paired);
    write_complete_marker(r.out, r.command.empty() ? "attnum loss" : r.command);
  }
  guard.commit();
  return o;
}

}  // namespace attnum::pipeline
