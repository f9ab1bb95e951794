#pragma once
// A layer pipeline across MPI ranks (docs/scaleout.md, "Models larger than a node"): for a model
// that does not fit one node, rank r holds only layers [begin_r, end_r) (contiguous, balanced) and
// the forward pass flows through the ranks: rank 0 embeds the tokens, each rank applies its layers
// to the residual stream [n_tok, dim] (fp32, sent to the next rank with MPI), and the last rank
// applies the final norm and the classifier. The arithmetic is forward()'s, so every value is the
// one a single process computes, bit for bit. Without MPI (or with one rank) rank 0 holds it all.
#include <span>
#include <string>
#include <vector>

#include "attnum/model/transformer.h"
#include "attnum/model/weights.h"

namespace attnum::scaleout {

/// Layers [begin, end) of `rank` among `ranks`: contiguous, in rank order, the first n_layers % ranks
/// ranks one layer more. Throws attnum::error when there are more ranks than layers.
model::layer_slice split_layers(int n_layers, int rank, int ranks);
/// This process's slice (here()'s rank and size); head: whether the last rank keeps the classifier.
model::layer_slice my_layers(int n_layers, bool head);
/// The model at `path` as this rank holds it (model::load_model reading only my_layers' slice).
model::weights load_my_layers(const std::string& path, bool head);

/// One forward pass through the pipeline (every rank calls it with the same tokens and options):
/// rank 0 embeds, every rank runs forward_layers on its slice (opt's hooks run on the rank that
/// holds the layer), and the last rank returns classify()'s logits when `logits` is set. Other
/// ranks (and the last one without `logits`) return an empty vector.
std::vector<float> forward_pipeline(const model::weights& w, std::span<const int> tokens,
                                    const model::forward_options& opt, bool logits);

/// forward_pipeline's logits on every rank (sent from the last rank to all): what a loss computed on
/// every rank from the same logits needs.
std::vector<float> forward_pipeline_shared(const model::weights& w, std::span<const int> tokens,
                                           const model::forward_options& opt);

/// Point-to-point transfers of floats (any count: sent in pieces below MPI's int limit); with no
/// MPI world they throw (they are never called in a single process).
void send_floats(const float* data, size_t count, int to, int tag);
void recv_floats(float* data, size_t count, int from, int tag);

}  // namespace attnum::scaleout
