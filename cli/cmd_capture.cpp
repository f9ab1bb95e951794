// attnum capture: writes post-RoPE Q/K/V of every layer, per (model, text), as safetensors.
#include <fmt/core.h>

#include "attnum/pipeline/capture_texts.h"
#include "cli/command.h"

namespace {
using capture_options = attnum::pipeline::capture_request;

void run(const capture_options& o) {
  // The written paths go to stdout at the end, not between redraws of the progress line.
  for (const auto& path : attnum::pipeline::capture_texts(o)) fmt::print("{}\n", path);
}

void setup(CLI::App& app) {
  auto o = std::make_shared<capture_options>();
  app.add_option("--model", o->model, "llama2.c checkpoint (.bin), Hugging Face folder or GGUF file")->required();
  app.add_option("--text", o->texts, "Text files (tokenized, BOS first where the model has one)");
  app.add_option("--token-ids", o->token_ids, "Files of whitespace-separated token ids");
  app.add_option("--tokenizer", o->tokenizer, "Tokenizer file (default: beside the model)");
  app.add_option("--tokens", o->tokens, "Tokens per capture (the first N)")->capture_default_str();
  app.add_option("--linear-precision", o->linear,
                 "Outside attention: auto (the checkpoint's own dtype), fp32, bf16 or fp16")
      ->capture_default_str();
  app.add_flag("--pipeline-layers", o->pipeline_layers,
               "Under mpirun: split the model's layers across the ranks (each holds a contiguous range; "
               "docs/scaleout.md)");
  app.add_option("--out", o->out, "Output folder")->required();
  app.callback([o] { run(*o); });
}
}  // namespace
ATTNUM_COMMAND("capture", "Write post-RoPE Q/K/V of every layer as safetensors (bf16)", setup);
