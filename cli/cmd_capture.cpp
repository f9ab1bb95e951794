// attnum capture: writes post-RoPE Q/K/V of every layer, per (model, text), as safetensors.
#include <fmt/core.h>

#include <filesystem>

#include "attnum/core/error.h"
#include "attnum/core/file.h"
#include "attnum/core/progress.h"
#include "attnum/model/capture.h"
#include "attnum/model/loader.h"
#include "cli/command.h"

namespace {
struct capture_options {
  std::string model, tokenizer, out, linear = "bf16";
  std::vector<std::string> texts, token_ids;
  int tokens = 1024;
};

std::string file_hash(const std::string& path) {
  const std::string s = attnum::read_file(path);
  return attnum::model::fnv1a_hex(s.data(), s.size());
}

void run(const capture_options& o) {
  using namespace attnum::model;
  namespace fs = std::filesystem;
  if (o.texts.empty() && o.token_ids.empty()) attnum::fail("capture: give --text FILE... or --token-ids FILE...");
  {  // --out never equal to or inside what the run reads
    std::vector<std::filesystem::path> in{o.model, o.tokenizer};
    in.insert(in.end(), o.texts.begin(), o.texts.end());
    in.insert(in.end(), o.token_ids.begin(), o.token_ids.end());
    attnum::require_out_outside_inputs(o.out, in);
  }
  weights w = load_model(o.model);
  if (o.tokens <= 0) attnum::fail("--tokens must be positive, got {}", o.tokens);
  if (o.tokens > w.cfg.seq_len)
    attnum::fail("--tokens {} is larger than the model's context {}", o.tokens, w.cfg.seq_len);
  const linear_precision p = parse_linear_precision(o.linear);
  std::unique_ptr<tokenizer> tok;
  if (!o.texts.empty()) tok = load_tokenizer(o.model, w, o.tokenizer);
  // Read and check every input before writing anything.
  struct job { std::vector<int> ids; capture_source src; };
  std::vector<job> jobs;
  for (const auto& f : o.texts)
    jobs.push_back({tokenize_file(f, *tok, w), {fs::path(f).stem().string(), file_hash(f), tok->source()}});
  for (const auto& f : o.token_ids)
    jobs.push_back({read_token_ids(f), {fs::path(f).stem().string(), file_hash(f), "token-ids"}});
  for (size_t i = 0; i < jobs.size(); ++i) {
    if (int(jobs[i].ids.size()) < o.tokens)
      attnum::fail("{}: {} tokens, --tokens asks for {}", jobs[i].src.text_id, jobs[i].ids.size(), o.tokens);
    jobs[i].ids.resize(o.tokens);
  }
  if (p == linear_precision::bf16) round_to_bf16(w);
  attnum::output_guard guard(o.out);  // docs/reliability.md: a failed run leaves --out as it was
  attnum::begin_output_dir(o.out);
  // The written paths go to stdout at the end, not between redraws of the progress line.
  std::vector<std::string> written;
  {
    attnum::progress bar("capture", static_cast<int64_t>(jobs.size()), "texts");
    for (const job& j : jobs) {
      written.push_back((fs::path(o.out) / capture_file_name(w.id, j.src.text_id)).string());
      write_capture(w, j.ids, j.src, p, written.back());
      bar.add();
    }
  }
  // No completion marker here: users pass the folder's files as --captures DIR/* (each file is
  // written atomically and read whole, so a killed capture leaves no half file).
  guard.commit();
  for (const auto& path : written) fmt::print("{}\n", path);
}

void setup(CLI::App& app) {
  auto o = std::make_shared<capture_options>();
  app.add_option("--model", o->model, "llama2.c checkpoint (.bin) or Hugging Face folder")->required();
  app.add_option("--text", o->texts, "Text files (tokenized, BOS first where the model has one)");
  app.add_option("--token-ids", o->token_ids, "Files of whitespace-separated token ids");
  app.add_option("--tokenizer", o->tokenizer, "Tokenizer file (default: beside the model)");
  app.add_option("--tokens", o->tokens, "Tokens per capture (the first N)")->capture_default_str();
  app.add_option("--linear-precision", o->linear, "Outside attention: bf16 or fp32")->capture_default_str();
  app.add_option("--out", o->out, "Output folder")->required();
  app.callback([o] { run(*o); });
}
}  // namespace
ATTNUM_COMMAND("capture", "Write post-RoPE Q/K/V of every layer as safetensors (bf16)", setup);
