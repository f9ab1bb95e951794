#include "attnum/scaleout/layers.h"

#include <algorithm>

#include "attnum/core/error.h"
#include "attnum/model/loader.h"
#include "attnum/scaleout/world.h"

#ifdef ATTNUM_HAVE_MPI
#include <mpi.h>
#endif

namespace attnum::scaleout {
namespace {
constexpr int kResidualTag = 101;
#ifdef ATTNUM_HAVE_MPI
constexpr size_t kPiece = size_t(1) << 30;  // floats per MPI message (below INT_MAX)
#endif
}  // namespace

model::layer_slice split_layers(int n_layers, int rank, int ranks) {
  if (ranks < 1 || rank < 0 || rank >= ranks) fail("rank {} of {}", rank, ranks);
  if (ranks > n_layers)
    fail("--pipeline-layers: {} ranks for a model of {} layers (every rank needs at least one layer)", ranks, n_layers);
  const int base = n_layers / ranks, extra = n_layers % ranks;
  model::layer_slice s;
  s.begin = rank * base + std::min(rank, extra);
  s.end = s.begin + base + (rank < extra ? 1 : 0);
  s.embeddings = rank == 0;
  s.head = rank == ranks - 1;
  return s;
}

model::layer_slice my_layers(int n_layers, bool head) {
  model::layer_slice s = split_layers(n_layers, here().rank, here().size);
  s.head = s.head && head;
  return s;
}

model::weights load_my_layers(const std::string& path, bool head) {
  return model::load_model(path, [head](const model::config& c) { return my_layers(c.n_layers, head); });
}

void send_floats(const float* data, size_t count, int to, int tag) {
#ifdef ATTNUM_HAVE_MPI
  if (here().mpi) {
    for (size_t b = 0; b < count; b += kPiece)
      MPI_Send(data + b, static_cast<int>(std::min(kPiece, count - b)), MPI_FLOAT, to, tag, MPI_COMM_WORLD);
    return;
  }
#endif
  (void)data, (void)count, (void)tag;
  fail("send to rank {} without an MPI world", to);
}

void recv_floats(float* data, size_t count, int from, int tag) {
#ifdef ATTNUM_HAVE_MPI
  if (here().mpi) {
    for (size_t b = 0; b < count; b += kPiece)
      MPI_Recv(data + b, static_cast<int>(std::min(kPiece, count - b)), MPI_FLOAT, from, tag, MPI_COMM_WORLD,
               MPI_STATUS_IGNORE);
    return;
  }
#endif
  (void)data, (void)count, (void)tag;
  fail("receive from rank {} without an MPI world", from);
}

std::vector<float> forward_pipeline(const model::weights& w, std::span<const int> tokens,
                                    const model::forward_options& opt, bool logits) {
  const world& me = here();  // one rank: its slice is the whole model, and this is forward()
  const int n = static_cast<int>(tokens.size());
  const model::layer_slice s = split_layers(w.cfg.n_layers, me.rank, me.size);
  std::vector<float> x;
  if (me.rank == 0) {
    x = model::embed(w, tokens);
  } else {
    x.resize(size_t(n) * w.cfg.dim);
    recv_floats(x.data(), x.size(), me.rank - 1, kResidualTag);
  }
  model::forward_layers(w, n, x, s.begin, s.end, opt);
  if (me.rank + 1 < me.size) {
    send_floats(x.data(), x.size(), me.rank + 1, kResidualTag);
    return {};
  }
  if (!logits) return {};
  return model::classify(w, n, x, opt);
}

std::vector<float> forward_pipeline_shared(const model::weights& w, std::span<const int> tokens,
                                           const model::forward_options& opt) {
  std::vector<float> logits = forward_pipeline(w, tokens, opt, true);
  const world& me = here();
  if (me.size == 1) return logits;
#ifdef ATTNUM_HAVE_MPI
  logits.resize(tokens.size() * size_t(w.cfg.vocab_size));
  for (size_t b = 0; b < logits.size(); b += kPiece)
    MPI_Bcast(logits.data() + b, static_cast<int>(std::min(kPiece, logits.size() - b)), MPI_FLOAT, me.size - 1,
              MPI_COMM_WORLD);
#endif
  return logits;
}

}  // namespace attnum::scaleout
