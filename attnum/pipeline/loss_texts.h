#pragma once
// `attnum loss` as a library call (the CLI and Python's attnum.loss): the teacher-forced loss of
// a model on text or token-id files with every attention layer swapped for each kernel under
// each condition (loss/loss_study.h), checkpointed in the result folder so that a killed run resumes;
// the reference logits computed, or read from a file that an earlier run saved (loss/reference_logits.h).
#include <string>
#include <vector>

#include "attnum/attention/condition.h"
#include "attnum/attention/kernel_spec.h"
#include "attnum/loss/loss_study.h"
#include "attnum/transforms/hadamard.h"

namespace attnum::pipeline {

struct loss_request {
  std::string model, tokenizer;
  std::vector<std::string> texts, token_ids;    ///< text files (tokenized) or token-id files; neither: the books
  int tokens = 1024, windows = 1;               ///< N labels per window (clamped to the context), K windows per file
  std::vector<attention::kernel_spec> kernels;  ///< resolved, one loss run each
  std::vector<std::string> knobs;               ///< applied to them (recorded)
  transforms::rotation rotation;
  std::vector<std::string> conditions = attention::all_condition_names();
  std::string reference = "bf16", linear = "auto";
  std::string save_reference;  ///< compute the reference logits once, write them here, then use them
  std::string reference_file;  ///< read the reference logits from here instead of computing them
  std::string out;             ///< result folder ("" for none)
  std::string shard;           ///< "I/N": only this shard's units, into out/loss-shard-I-of-N.json
  std::string command;         ///< the command line recorded in the completion marker
  bool progress = true;        ///< progress lines (core/progress.h)
  bool notices = true;         ///< notices on stderr (windows clamped to the context, reference saved)
  /// Split the model's layers across the MPI ranks (scaleout/layers.h): every window's forward
  /// passes flow through all ranks, each holding only its layers; the same rows as one process.
  bool pipeline_layers = false;
};

struct loss_outcome {
  std::string model_id;
  int n_tokens = 0;                      ///< labels per window after clamping to the context
  std::vector<loss::loss_row> rows;      ///< per kernel (in the order given) and condition
  std::vector<loss::paired_row> paired;  ///< the paired comparisons (loss::kPairedComparisons)
  int shard_units = -1;                  ///< a shard run: the units written (rows stay empty)
};

/// Checks every input before any work, then runs the loss of each kernel: into r.out (DIR/loss.json,
/// loss.csv, loss_paired.{json,csv}, checkpoints under DIR/checkpoints, or DIR/KERNEL/checkpoints
/// for several kernels; a failed run leaves the folder as it was) or only in memory. Under mpirun
/// the windows are divided among the ranks and rank 0 gets the rows. Throws attnum::error on bad
/// input.
loss_outcome run_loss_request(const loss_request& r);

}  // namespace attnum::pipeline
