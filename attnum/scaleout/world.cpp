#include "attnum/scaleout/world.h"

#include <cstdio>
#include <cstdlib>
#include <algorithm>
#include <cstring>
#include <deque>
#include <map>

#include "attnum/core/error.h"
#include "attnum/core/file.h"

#ifdef ATTNUM_HAVE_MPI
#include <mpi.h>
#endif

namespace attnum::scaleout {
namespace {
world g_world;
bool g_initialised = false;

#ifdef ATTNUM_HAVE_MPI
// Launchers we know set one of these in every rank's environment.
bool started_by_launcher() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_SIZE", "MPI_LOCALNRANKS"})
    if (std::getenv(v)) return true;
  return false;
}
#endif
}  // namespace

void init(int* argc, char*** argv) {
  if (g_initialised) return;
  g_initialised = true;
#ifdef ATTNUM_HAVE_MPI
  if (!started_by_launcher()) return;
  int provided = 0;
  MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &g_world.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &g_world.size);
  g_world.mpi = true;
#else
  (void)argc;
  (void)argv;
  // Built without MPI but started by a launcher as one of several ranks: every process would run
  // the whole job as a rank 0 of its own and write the same outputs at once. Refuse, as bad input.
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"})
    if (const char* n = std::getenv(v); n && std::atoi(n) > 1) {
      std::fprintf(stderr,
                   "error: attnum was built without MPI (ATTNUM_MPI=OFF or no MPI found) but was started as one "
                   "of %d ranks (%s): rebuild with MPI (scripts/setup installs Open MPI) or run one process\n",
                   std::atoi(n), v);
      std::exit(2);
    }
#endif
}

void finalize() {
#ifdef ATTNUM_HAVE_MPI
  if (g_world.mpi) {
    MPI_Finalize();
    g_world.mpi = false;
  }
#endif
}

void abort_all(int code) {
#ifdef ATTNUM_HAVE_MPI
  if (g_world.mpi) MPI_Abort(MPI_COMM_WORLD, code);
#endif
  std::exit(code);
}

const world& here() { return g_world; }

std::string broadcast(const std::string& text) {
#ifdef ATTNUM_HAVE_MPI
  if (g_world.mpi && g_world.size > 1) {
    unsigned long long n = text.size();
    MPI_Bcast(&n, 1, MPI_UNSIGNED_LONG_LONG, 0, MPI_COMM_WORLD);
    std::string out = g_world.root() ? text : std::string(n, '\0');
    if (n) MPI_Bcast(out.data(), static_cast<int>(n), MPI_CHAR, 0, MPI_COMM_WORLD);
    return out;
  }
#endif
  return text;
}

void barrier() {
#ifdef ATTNUM_HAVE_MPI
  if (g_world.mpi) MPI_Barrier(MPI_COMM_WORLD);
#endif
}

namespace {
// Computes units[first], units[first+stride], ... in batches; `deliver` gets each batch's results.
void compute_share(const std::vector<int>& units, int first, int stride, int batch,
                   const std::function<std::string(int)>& compute,
                   const std::function<void(int, std::string&)>& deliver, const std::function<void()>& between) {
  std::vector<int> mine;
  for (size_t k = first; k < units.size(); k += stride) mine.push_back(units[k]);
  // Test hook: ATTNUM_TEST_DIE_RANK=r and ATTNUM_TEST_DIE_AFTER=k make rank r exit abruptly
  // (as a crashed node would) after delivering k units, to test that a rerun resumes.
  int die_after = -1;
  if (const char* r = std::getenv("ATTNUM_TEST_DIE_RANK"); r && std::atoi(r) == g_world.rank)
    if (const char* k = std::getenv("ATTNUM_TEST_DIE_AFTER")) die_after = std::atoi(k);
  int delivered = 0;
  batch = batch < 1 ? 1 : batch;
  for (size_t b = 0; b < mine.size(); b += batch) {
    const size_t e = std::min(mine.size(), b + batch);
    std::vector<std::string> out(e - b);
    std::vector<std::string> errors(e - b);
    // A batch of one runs outside a parallel region so the unit's own OpenMP loops get the threads.
#pragma omp parallel for schedule(dynamic, 1) if (e - b > 1)
    for (long k = static_cast<long>(b); k < static_cast<long>(e); ++k) {
      try {
        out[k - b] = compute(mine[k]);
      } catch (const std::exception& ex) {
        errors[k - b] = ex.what();
      }
    }
    for (size_t k = b; k < e; ++k)
      if (!errors[k - b].empty()) throw error(errors[k - b]);
    for (size_t k = b; k < e; ++k) {
      if (delivered++ == die_after) std::_Exit(9);
      deliver(mine[k], out[k - b]);
    }
    if (between) between();
  }
}
}  // namespace

void distribute(const std::vector<int>& units, const std::function<std::string(int)>& compute,
                const std::function<void(int, const std::string&)>& store, int batch,
                const std::function<void(int, int)>& progress) {
  const int total = static_cast<int>(units.size());
  int done = 0;
  auto stored = [&](int u, const std::string& bytes) {
    store(u, bytes);
    ++done;
    if (progress) progress(done, total);
  };
#ifdef ATTNUM_HAVE_MPI
  if (g_world.mpi && g_world.size > 1) {
    constexpr int kTag = 7301;
    auto drain = [&](bool block) {
      for (;;) {
        int flag = 0;
        MPI_Status st;
        if (block) {
          MPI_Probe(MPI_ANY_SOURCE, kTag, MPI_COMM_WORLD, &st);
          flag = 1;
        } else {
          MPI_Iprobe(MPI_ANY_SOURCE, kTag, MPI_COMM_WORLD, &flag, &st);
        }
        if (!flag) return;
        int n = 0;
        MPI_Get_count(&st, MPI_CHAR, &n);
        std::string msg(n, '\0');
        MPI_Recv(msg.data(), n, MPI_CHAR, st.MPI_SOURCE, kTag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        // Message: 4-byte unit index, then the payload.
        int u = 0;
        std::memcpy(&u, msg.data(), sizeof u);
        stored(u, msg.substr(sizeof u));
        if (block) return;
      }
    };
    if (g_world.root()) {
      compute_share(
          units, 0, g_world.size, batch, compute, [&](int u, std::string& bytes) { stored(u, bytes); },
          [&] { drain(false); });
      while (done < total) drain(true);
    } else {
      // Non-blocking sends: a rank goes on computing while rank 0 is busy with its own unit
      // (a blocking send would idle it until rank 0 next drains, about half a unit per unit).
      std::deque<std::string> in_flight;
      std::vector<MPI_Request> requests;
      compute_share(units, g_world.rank, g_world.size, batch, compute,
                    [&](int u, std::string& bytes) {
                      std::string& msg = in_flight.emplace_back(sizeof u, '\0');
                      std::memcpy(msg.data(), &u, sizeof u);
                      msg += bytes;
                      requests.emplace_back();
                      MPI_Isend(msg.data(), static_cast<int>(msg.size()), MPI_CHAR, 0, kTag, MPI_COMM_WORLD,
                                &requests.back());
                    },
                    {});
      MPI_Waitall(static_cast<int>(requests.size()), requests.data(), MPI_STATUSES_IGNORE);
    }
    barrier();
    return;
  }
#endif
  compute_share(units, 0, 1, batch, compute, [&](int u, std::string& bytes) { stored(u, bytes); }, {});
}

shard parse_shard(const std::string& text) {
  shard s;
  const auto slash = text.find('/');
  try {
    if (slash == std::string::npos) throw std::invalid_argument("no slash");
    size_t p1 = 0, p2 = 0;
    s.index = std::stoi(text.substr(0, slash), &p1);
    s.count = std::stoi(text.substr(slash + 1), &p2);
    if (p1 != slash || p2 != text.size() - slash - 1) throw std::invalid_argument("trailing");
  } catch (const std::exception&) {
    fail("--shard '{}': expected I/N with integers 0 <= I < N", clip(text));
  }
  if (s.count < 1 || s.index < 0 || s.index >= s.count) fail("--shard '{}': expected I/N with 0 <= I < N", clip(text));
  return s;
}

}  // namespace attnum::scaleout
