#pragma once
// Scale-out across processes: MPI ranks (`mpirun -n R attnum ...`) when the build has MPI and
// the process was started by an MPI launcher; a single-process world otherwise.
//
// The model is "rank 0 owns the output folder": every rank computes its share of the work units
// (round-robin by unit index), serialises each unit's result, and sends it to rank 0, which
// stores it (a checkpoint file) as it arrives. A rank that dies takes the job down (MPI's
// default error handler); rank 0 has stored every unit received so far, so rerunning the same
// command resumes from them. Results never depend on which rank computed a unit.
#include <functional>
#include <string>
#include <vector>

namespace attnum::scaleout {

/// This process's place in the world.
struct world {
  int rank = 0;
  int size = 1;
  bool mpi = false;  ///< true when running under MPI with more than one process possible
  bool root() const { return rank == 0; }
};

/// Initialises MPI when started by an MPI launcher (and the build has MPI); idempotent.
void init(int* argc, char*** argv);
/// Finalises MPI if it was initialised.
void finalize();
/// Aborts every rank with an exit code (after a fatal error on one rank).
[[noreturn]] void abort_all(int code);
/// Returns this process's world.
const world& here();

/// Returns rank 0's `text` on every rank.
std::string broadcast(const std::string& text);
/// Waits for every rank.
void barrier();

/// Computes `units` across all ranks and hands every result to rank 0's `store`.
/// Rank r computes units[k] for k % size == r, in batches of `batch` units computed in parallel
/// (OpenMP) by `compute` (which must be thread-safe and return the unit's serialised result);
/// rank 0 calls `store(unit, bytes)` (single-threaded, in arrival order) for every unit,
/// including its own. Returns on every rank once all units are stored. `progress(done, total)`
/// is called on rank 0 only.
void distribute(const std::vector<int>& units, const std::function<std::string(int)>& compute,
                const std::function<void(int, const std::string&)>& store, int batch,
                const std::function<void(int, int)>& progress = {});

/// Parses a job-array shard "I/N" (0 <= I < N); throws attnum::error naming the text otherwise.
struct shard {
  int index = 0, count = 1;
};
shard parse_shard(const std::string& text);

}  // namespace attnum::scaleout
