// The loss study's driver in one process (loss/loss_study.h).
#include "attnum/loss/loss_study.h"

namespace attnum::loss {

std::vector<loss_row> run_loss(const model::weights& w, const loss_params& p) {
  validate(p, w);
  return summarize(p, w.id, compute_units(w, p, all_units(p)));
}

std::vector<loss_row> run_loss(const model::weights& w, const loss_params& p, std::vector<paired_row>& paired) {
  validate(p, w);
  std::vector<unit_result> results = compute_units(w, p, all_units(p));
  paired = summarize_paired(p, w.id, results);
  return summarize(p, w.id, std::move(results));
}

}  // namespace attnum::loss
