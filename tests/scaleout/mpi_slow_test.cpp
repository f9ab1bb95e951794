// Scale-out: `mpirun -n R attnum heads|loss|study` and `--shard I/N` + `attnum merge`
// write exactly the files of a single-process run; a rank that dies makes the run fail, and the
// rerun resumes from the stored units and ends with identical files.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>
#include "cli_util.h"

namespace fs = std::filesystem;

namespace {

using attnum::test::run_result;
run_result sh(const std::string& cmd) { return attnum::test::run_command(cmd + " 2>&1"); }

// Whether attnum was built with MPI (ATTNUM_MPI on and MPI found): without it every process of
// an mpirun is a rank 0 of its own, so the mpirun runs below cannot hold.
#ifdef ATTNUM_HAVE_MPI
constexpr bool kMpiBuilt = true;
#else
constexpr bool kMpiBuilt = false;
#endif

bool have_mpirun() { return sh("command -v mpirun").status == 0; }

// Skips in a build without MPI (scripts/test's sanitizer build, -DATTNUM_MPI=OFF) and where
// mpirun is absent, except under CI, where an MPI build without mpirun is a failure.
#define REQUIRE_MPIRUN()                                                                               \
  do {                                                                                                 \
    if (!kMpiBuilt) GTEST_SKIP() << "attnum built without MPI (ATTNUM_MPI=OFF): mpirun runs skipped";  \
    if (!have_mpirun()) {                                                                              \
      if (std::getenv("CI")) FAIL() << "mpirun missing under CI (scripts/setup installs openmpi-bin)"; \
      GTEST_SKIP() << "mpirun not installed (openmpi-bin): MPI tests skipped";                         \
    }                                                                                                  \
  } while (0)

const std::string kBin = ATTNUM_BINARY;
const std::string kMpirun =
    "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 "
    "mpirun --oversubscribe ";

// A scratch folder per test; commands run inside it with relative --out paths, so the command
// lines recorded in the result files are the same for every way of running.
fs::path scratch(const std::string& name) {
  fs::path d = fs::temp_directory_path() / ("attnum-mpi-" + name);
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

// The result files of a head-study folder (checkpoints excluded: their set may differ).
const std::vector<std::string> kHeadFiles = {"meta.json", "rows.csv",    "rows.jsonl",
                                             "heads.csv", "heads.jsonl", "summary.json"};

void expect_same_files(const fs::path& a, const fs::path& b, const std::vector<std::string>& files) {
  for (const auto& f : files) {
    ASSERT_TRUE(fs::exists(a / f)) << (a / f);
    ASSERT_TRUE(fs::exists(b / f)) << (b / f);
    EXPECT_TRUE(attnum::test::comparable_result(a / f) == attnum::test::comparable_result(b / f))
        << f << " differs between " << a << " and " << b;
  }
}

const std::string kHeadsArgs =
    " heads --zoo --layers 1 --n-tok 128 --kernel fa3,sage2pp-sm89 --conditions plain,rotate,center "
    "--quiet --out ";

}  // namespace

TEST(mpi_test, heads_two_and_three_ranks_equal_single_process) {
  REQUIRE_MPIRUN();
  const fs::path d = scratch("heads");
  auto single = sh("cd " + d.string() + " && " + kBin + " --threads 2" + kHeadsArgs + "single");
  ASSERT_EQ(single.status, 0) << single.out;
  auto two = sh("cd " + d.string() + " && " + kMpirun + "-n 2 " + kBin + " --threads 1" + kHeadsArgs + "two");
  ASSERT_EQ(two.status, 0) << two.out;
  auto three = sh("cd " + d.string() + " && " + kMpirun + "-n 3 " + kBin + " --threads 1" + kHeadsArgs + "three");
  ASSERT_EQ(three.status, 0) << three.out;
  expect_same_files(d / "single", d / "two", kHeadFiles);
  expect_same_files(d / "single", d / "three", kHeadFiles);
}

TEST(mpi_test, heads_killed_rank_fails_then_rerun_resumes_identically) {
  REQUIRE_MPIRUN();
  const fs::path d = scratch("kill");
  auto single = sh("cd " + d.string() + " && " + kBin + kHeadsArgs + "single");
  ASSERT_EQ(single.status, 0) << single.out;
  // Rank 1 dies after delivering 2 units: the run must fail, leave no result files, and keep the
  // units rank 0 stored.
  auto killed =
      sh("cd " + d.string() + " && ATTNUM_TEST_DIE_RANK=1 ATTNUM_TEST_DIE_AFTER=2 " + kMpirun +
         "-x ATTNUM_TEST_DIE_RANK -x ATTNUM_TEST_DIE_AFTER -n 2 " + kBin + " --threads 1" + kHeadsArgs + "mpi");
  EXPECT_NE(killed.status, 0) << killed.out;
  EXPECT_FALSE(fs::exists(d / "mpi" / "summary.json"));
  int stored = 0;
  for (const auto& e : fs::directory_iterator(d / "mpi" / "checkpoints"))
    stored += e.path().filename().string().rfind("unit-", 0) == 0;
  EXPECT_GT(stored, 0) << "no unit was kept for the rerun";
  auto rerun = sh("cd " + d.string() + " && " + kMpirun + "-n 2 " + kBin + " --threads 1" + kHeadsArgs + "mpi");
  ASSERT_EQ(rerun.status, 0) << rerun.out;
  expect_same_files(d / "single", d / "mpi", kHeadFiles);
  // Ranks send their units to rank 0 as text and make no scratch folder: none of a dead rank
  // (attnum-rankR-PID, as earlier versions made) is left in the temp folder.
  for (const auto& e : fs::directory_iterator(fs::temp_directory_path())) {
    const std::string f = e.path().filename().string();
    if (f.rfind("attnum-rank", 0) != 0) continue;
    const std::string pid = f.substr(f.rfind('-') + 1);
    EXPECT_EQ(sh("kill -0 " + pid).status, 0) << e.path() << " of a dead process is left";
  }
}

TEST(mpi_test, heads_three_shards_merged_equal_single_run) {
  const fs::path d = scratch("shards");
  auto single = sh("cd " + d.string() + " && " + kBin + kHeadsArgs + "single");
  ASSERT_EQ(single.status, 0) << single.out;
  std::string dirs;
  for (int i = 0; i < 3; ++i) {
    auto r = sh("cd " + d.string() + " && " + kBin + kHeadsArgs + "shard" + std::to_string(i) + " --shard " +
                std::to_string(i) + "/3");
    ASSERT_EQ(r.status, 0) << r.out;
    dirs += " shard" + std::to_string(i);
  }
  auto merged = sh("cd " + d.string() + " && " + kBin + " merge" + dirs + " --out merged");
  ASSERT_EQ(merged.status, 0) << merged.out;
  expect_same_files(d / "single", d / "merged", kHeadFiles);
}

TEST(mpi_test, loss_two_ranks_and_shards_equal_single_process) {
  const fs::path model = fs::path(ATTNUM_DATA_DIR) / "stories260K.bin";
  const fs::path ids = fs::path(ATTNUM_DATA_DIR) / "stories260K_greedy_reference_ids.txt";
  ASSERT_TRUE(fs::exists(model)) << model;
  const fs::path d = scratch("loss");
  // Four windows of 48 tokens from the reference ids (used as given).
  const std::string args = " loss --model " + model.string() + " --token-ids " + ids.string() +
                           " --tokens 48 --windows 4 --kernel fa3 --conditions plain,rotate --json --out ";
  auto single = sh("cd " + d.string() + " && " + kBin + args + "single");
  ASSERT_EQ(single.status, 0) << single.out;
  if (kMpiBuilt && have_mpirun()) {
    auto two = sh("cd " + d.string() + " && " + kMpirun + "-n 2 " + kBin + " --threads 1" + args + "two");
    ASSERT_EQ(two.status, 0) << two.out;
    EXPECT_EQ(single.out, two.out);
    expect_same_files(d / "single", d / "two", {"loss.json", "loss.csv"});
  } else if (kMpiBuilt && std::getenv("CI")) {
    FAIL() << "mpirun missing under CI";
  }
  std::string dirs;
  for (int i = 0; i < 3; ++i) {
    auto r = sh("cd " + d.string() + " && " + kBin + args + "lshard" + std::to_string(i) + " --shard " +
                std::to_string(i) + "/3");
    ASSERT_EQ(r.status, 0) << r.out;
    dirs += " lshard" + std::to_string(i);
  }
  auto merged = sh("cd " + d.string() + " && " + kBin + " merge" + dirs + " --out lmerged");
  ASSERT_EQ(merged.status, 0) << merged.out;
  expect_same_files(d / "single", d / "lmerged", {"loss.json", "loss.csv"});
}

TEST(mpi_test, study_two_ranks_equal_single_process) {
  REQUIRE_MPIRUN();
  const fs::path d = scratch("study");
  const std::string args = " study --zoo-layers 1 --zoo-tokens 96 --kernels fa3 --no-report --quiet --out ";
  auto single = sh("cd " + d.string() + " && " + kBin + " --threads 2" + args + "single");
  ASSERT_EQ(single.status, 0) << single.out;
  auto two = sh("cd " + d.string() + " && " + kMpirun + "-n 2 " + kBin + " --threads 1" + args + "two");
  ASSERT_EQ(two.status, 0) << two.out;
  EXPECT_EQ(single.out, two.out);  // the printed summary table
  expect_same_files(d / "single" / "heads", d / "two" / "heads", kHeadFiles);
  expect_same_files(d / "single" / "pcast", d / "two" / "pcast",
                    {"pcast_theory.csv", "pcast_dp.csv", "pcast_simulate.csv", "pcast_overflow.csv"});
}

// --pipeline-layers: the model's 5 layers split across 2 and 3 ranks (3+2 and 2+2+1), the residual
// stream sent from rank to rank: the same capture files as one process, byte for byte.
TEST(mpi_test, capture_pipeline_layers_two_and_three_ranks_equal_single_process) {
  REQUIRE_MPIRUN();
  const fs::path model = fs::path(ATTNUM_DATA_DIR) / "stories260K.bin";
  const fs::path ids = fs::path(ATTNUM_DATA_DIR) / "stories260K_greedy_reference_ids.txt";
  const fs::path text = fs::path(ATTNUM_DATA_DIR) / "stories260K_greedy_reference.txt";
  const fs::path d = scratch("capture-pipeline");
  for (const std::string lin : {"fp32", "bf16"}) {
    const std::string args = " capture --model " + model.string() + " --token-ids " + ids.string() + " --text " +
                             text.string() + " --tokens 64 --linear-precision " + lin + " --quiet --out ";
    auto single = sh("cd " + d.string() + " && " + kBin + " --threads 2" + args + "single-" + lin);
    ASSERT_EQ(single.status, 0) << single.out;
    for (const std::string ranks : {"2", "3"}) {
      const std::string out = "pipe" + ranks + "-" + lin;
      auto r = sh("cd " + d.string() + " && " + kMpirun + "-n " + ranks + " " + kBin + " --threads 1" + args + out +
                  " --pipeline-layers");
      ASSERT_EQ(r.status, 0) << r.out;
      int files = 0;
      for (const auto& e : fs::directory_iterator(d / ("single-" + lin))) {
        ++files;
        const fs::path other = d / out / e.path().filename();
        ASSERT_TRUE(fs::exists(other)) << other;
        EXPECT_EQ(attnum::test::run_command("cmp " + e.path().string() + " " + other.string()).status, 0)
            << other << " differs from " << e.path();
      }
      EXPECT_EQ(files, 2);
    }
  }
  // More ranks than layers: refused on every rank (exit 2), nothing written.
  auto six = sh("cd " + d.string() + " && " + kMpirun + "-n 6 " + kBin + " --threads 1 capture --model " +
                model.string() + " --token-ids " + ids.string() + " --tokens 64 --pipeline-layers --out six");
  EXPECT_NE(six.status, 0) << six.out;
  EXPECT_NE(six.out.find("6 ranks for a model of 5 layers"), std::string::npos) << six.out;
  EXPECT_FALSE(fs::exists(d / "six"));
}

// loss --pipeline-layers: every window's reference and variant forward passes flow through 2 and
// 3 ranks; the rows and files are a single process's, byte for byte.
TEST(mpi_test, loss_pipeline_layers_two_and_three_ranks_equal_single_process) {
  REQUIRE_MPIRUN();
  const fs::path model = fs::path(ATTNUM_DATA_DIR) / "stories260K.bin";
  const fs::path ids = fs::path(ATTNUM_DATA_DIR) / "stories260K_greedy_reference_ids.txt";
  const fs::path d = scratch("loss-pipeline");
  const std::string args = " loss --model " + model.string() + " --token-ids " + ids.string() +
                           " --tokens 48 --windows 3 --kernel fa3,sage2pp-sm89 --conditions plain,rotate --json "
                           "--quiet --out ";
  auto single = sh("cd " + d.string() + " && " + kBin + " --threads 2" + args + "single");
  ASSERT_EQ(single.status, 0) << single.out;
  const std::vector<std::string> files = {"loss.json", "loss.csv", "loss_paired.json", "loss_paired.csv"};
  for (const std::string ranks : {"2", "3"}) {
    const std::string out = "pipe" + ranks;
    auto r = sh("cd " + d.string() + " && " + kMpirun + "-n " + ranks + " " + kBin + " --threads 1" + args + out +
                " --pipeline-layers");
    ASSERT_EQ(r.status, 0) << r.out;
    EXPECT_EQ(single.out, r.out);
    for (const auto& f : files)
      EXPECT_EQ(attnum::test::run_command("cmp " + (d / "single" / f).string() + " " + (d / out / f).string()).status,
                0)
          << f << " differs";
  }
  // What a rank holding only its layers cannot do is refused (exit 2) before any work.
  auto refused = sh("cd " + d.string() + " && " + kMpirun + "-n 2 " + kBin + " --threads 1" + args +
                    "ref --pipeline-layers --reference-file nowhere.bin");
  EXPECT_NE(refused.status, 0) << refused.out;
  EXPECT_NE(refused.out.find("--reference-file and --shard are not supported"), std::string::npos) << refused.out;
  EXPECT_FALSE(fs::exists(d / "ref"));
}

// study --model M --pipeline-layers: the captures and the loss through 3 ranks (2+2+1 layers), the
// head study's units divided among them as without it: the same files as one process (the same
// --out name in two folders, so the recorded paths agree; summary.json's timings aside).
TEST(mpi_test, study_pipeline_layers_three_ranks_equal_single_process) {
  REQUIRE_MPIRUN();
  const fs::path d = scratch("study-pipeline");
  {  // a text long enough for the study's windows: the reference story, repeated
    const std::string story =
        attnum::test::run_command("cat " + (fs::path(ATTNUM_DATA_DIR) / "stories260K_greedy_reference.txt").string())
            .out;
    std::ofstream t(d / "story.txt");
    for (int i = 0; i < 80; ++i) t << story << "\n";
  }
  fs::create_directories(d / "single");
  fs::create_directories(d / "pipe");
  const std::string args = " study --model " + (fs::path(ATTNUM_DATA_DIR) / "stories260K.bin").string() +
                           " --text ../story.txt --tokens 256 --kernels fa3 --conditions plain,rotate --no-report "
                           "--quiet --out r";
  auto single = sh("cd " + (d / "single").string() + " && " + kBin + " --threads 2" + args);
  ASSERT_EQ(single.status, 0) << single.out;
  auto pipe = sh("cd " + (d / "pipe").string() + " && " + kMpirun + "-n 3 " + kBin + " --threads 1" + args +
                 " --pipeline-layers");
  ASSERT_EQ(pipe.status, 0) << pipe.out;
  EXPECT_EQ(single.out, pipe.out);
  const fs::path a = d / "single" / "r", b = d / "pipe" / "r";
  int captures = 0;
  for (const auto& e : fs::directory_iterator(a / "captures")) {
    ++captures;
    EXPECT_EQ(
        attnum::test::run_command("cmp " + e.path().string() + " " + (b / "captures" / e.path().filename()).string())
            .status,
        0)
        << e.path().filename() << " differs";
  }
  EXPECT_GT(captures, 1);
  expect_same_files(a / "heads", b / "heads", kHeadFiles);
  expect_same_files(a / "loss", b / "loss", {"loss.json", "loss.csv", "loss_paired.json", "loss_paired.csv"});
  auto summary = [](const fs::path& f) {
    nlohmann::json j = nlohmann::json::parse(attnum::test::comparable_result(f));
    j.erase("timings");
    return j.dump(2);
  };
  EXPECT_EQ(summary(a / "summary.json"), summary(b / "summary.json"));
  // The synthetic zoo has no model layers to split: refused.
  auto zoo = sh("cd " + d.string() + " && " + kBin + " study --zoo-layers 1 --pipeline-layers --out zoo");
  EXPECT_EQ(zoo.status, 2) << zoo.out;
  EXPECT_NE(zoo.out.find("needs --model"), std::string::npos) << zoo.out;
}

namespace {
// A build without MPI started by a launcher as one of several ranks refuses (exit 2, says why)
// instead of running the whole job once per process into the same files.
TEST(mpi_test, a_build_without_mpi_refuses_to_run_as_one_of_several_ranks) {
  if (kMpiBuilt) GTEST_SKIP() << "attnum built with MPI: this checks a build without it";
  for (const char* env : {"OMPI_COMM_WORLD_SIZE=3", "PMI_SIZE=2"}) {
    const auto r = sh(std::string(env) + " " + kBin + " version");
    EXPECT_EQ(r.status, 2) << env << ": " << r.out;
    EXPECT_NE(r.out.find("built without MPI"), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find("isa:"), std::string::npos) << "ran anyway: " << r.out;
  }
  const auto one = sh("OMPI_COMM_WORLD_SIZE=1 " + kBin + " version");
  EXPECT_EQ(one.status, 0) << one.out;
}
}  // namespace
