// core/file.h: names inside a folder, allocation limits, output guards, stale temp files and the
// completion marker (docs/reliability.md).
#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "attnum/core/error.h"
#include "attnum/core/file.h"
#include "attnum/core/parallel.h"

#include "formats/io_test_util.h"

namespace fs = std::filesystem;

namespace {

fs::path fresh(const std::string& name) { return io_test::fresh_dir("attnum-file-test", name); }
using io_test::put;

std::string what(auto&& f) { return io_test::error_text(f); }

TEST(file_test, path_inside_refuses_escapes) {
  const fs::path d = "/models/m";
  EXPECT_EQ(attnum::path_inside(d, "a.safetensors", "f"), d / "a.safetensors");
  EXPECT_EQ(attnum::path_inside(d, "sub/a.safetensors", "f"), d / "sub/a.safetensors");
  for (const char* bad : {"../a", "/etc/passwd", "a/../../b", "..", ""})
    EXPECT_NE(what([&] { attnum::path_inside(d, bad, "index.json: weight_map[x]"); }).find("weight_map[x]"),
              std::string::npos)
        << bad;
}

TEST(file_test, check_alloc_names_the_size) {
  EXPECT_NO_THROW(attnum::check_alloc(1 << 20, "small"));
  const std::string m = what([] { attnum::check_alloc(uint64_t{1} << 62, "zoo: --n-tok 9"); });
  EXPECT_NE(m.find("zoo: --n-tok 9 needs"), std::string::npos) << m;
  EXPECT_NE(m.find("GiB"), std::string::npos) << m;
  EXPECT_EQ(attnum::checked_mul(uint64_t{1} << 40, uint64_t{1} << 30), UINT64_MAX);
  EXPECT_EQ(attnum::checked_mul(3, 5), 15u);
}

TEST(file_test, read_file_refuses_folders_and_fifos_without_blocking) {
  const fs::path d = fresh("read");
  EXPECT_NE(what([&] { attnum::read_file(d); }).find("is a folder"), std::string::npos);
  const fs::path fifo = d / "fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_NE(what([&] { attnum::read_file(fifo); }).find("FIFO"), std::string::npos);
  put(d / "f.txt", "hello");
  EXPECT_EQ(attnum::read_file(d / "f.txt"), "hello");
  fs::remove_all(d);
}

TEST(file_test, output_guard_removes_only_what_a_failed_run_wrote) {
  const fs::path d = fresh("guard");
  {  // a new folder goes whole when only this run wrote into it
    attnum::output_guard g(d / "new");
    attnum::write_file_atomic(d / "new/a/b.txt", "x");
  }
  EXPECT_FALSE(fs::exists(d / "new"));
  put(d / "old/keep.txt", "earlier run");
  put(d / "old/checkpoints/unit-0.json", "{}");
  {
    attnum::output_guard g(d / "old");
    attnum::write_file_atomic(d / "old/checkpoints/unit-1.json", "{}");
    attnum::write_file_atomic(d / "old/rows.csv", "new");
  }
  EXPECT_TRUE(fs::exists(d / "old/keep.txt"));
  EXPECT_TRUE(fs::exists(d / "old/checkpoints/unit-0.json"));
  EXPECT_FALSE(fs::exists(d / "old/checkpoints/unit-1.json"));
  EXPECT_FALSE(fs::exists(d / "old/rows.csv"));
  {  // committed: everything stays
    attnum::output_guard g(d / "ok");
    attnum::write_file_atomic(d / "ok/r.csv", "x");
    g.commit();
  }
  EXPECT_TRUE(fs::exists(d / "ok/r.csv"));
  fs::remove_all(d);
}

TEST(file_test, a_failed_run_keeps_what_another_process_wrote_meanwhile) {
  const fs::path d = fresh("meanwhile");
  {
    attnum::output_guard g(d / "D");  // D does not exist yet
    attnum::write_file_atomic(d / "D/rows.csv", "ours");
    put(d / "D/pcast_dp.csv", "another run's result");  // not written by this process
    put(d / "D/sub/complete.json", "{}");
  }
  EXPECT_FALSE(fs::exists(d / "D/rows.csv"));
  EXPECT_EQ(attnum::read_file(d / "D/pcast_dp.csv"), "another run's result");
  EXPECT_TRUE(fs::exists(d / "D/sub/complete.json"));
  fs::remove_all(d);
}

TEST(file_test, begin_output_dir_removes_only_recorded_temp_files) {
  const fs::path d = fresh("stale");
  // User files that look like temp files of any naming scheme stay.
  for (const char* f : {"notes.tmp.4000000", "sub/draft.tmp.99999", "backup.tmp.20240101", "rows.csv.tmp.2147483646",
                        "x.attnum-tmp-0123456789abcdef"})
    put(d / f, "user file");
  // A killed run recorded its token in the lock file: its temp files (and only those) go.
  put(d / attnum::kLockFile, "fedcba9876543210\n");
  put(d / "checkpoints/unit-000003.jsonl.attnum-tmp-fedcba9876543210", "killed writer");
  attnum::begin_output_dir(d);
  EXPECT_FALSE(fs::exists(d / "checkpoints/unit-000003.jsonl.attnum-tmp-fedcba9876543210"));
  for (const char* f : {"notes.tmp.4000000", "sub/draft.tmp.99999", "backup.tmp.20240101", "rows.csv.tmp.2147483646",
                        "x.attnum-tmp-0123456789abcdef"})
    EXPECT_EQ(attnum::read_file(d / f), "user file") << f;
  // The lock file now records this run.
  EXPECT_EQ(attnum::read_file(d / attnum::kLockFile), attnum::run_token() + "\n");
  fs::remove_all(d);
}

TEST(file_test, a_second_writer_of_one_folder_is_refused) {
  const fs::path d = fresh("lock");
  // Another process's lock (flock locks belong to the open file, so a second open stands in).
  const int fd = ::open((d / attnum::kLockFile).c_str(), O_RDWR | O_CREAT, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::flock(fd, LOCK_EX | LOCK_NB), 0);
  const std::string m = what([&] { attnum::begin_output_dir(d); });
  EXPECT_NE(m.find("another attnum run is writing into this folder"), std::string::npos) << m;
  EXPECT_NE(m.find(d.string()), std::string::npos) << m;
  ::close(fd);
  EXPECT_NO_THROW(attnum::begin_output_dir(d));  // free now
  EXPECT_NO_THROW(attnum::begin_output_dir(d));  // this process holds it already
  fs::remove_all(d);
}

TEST(file_test, out_inside_or_equal_to_an_input_is_refused) {
  const fs::path d = fresh("inside");
  put(d / "model/config.json", "{}");
  put(d / "q.npy", "x");
  const std::string m1 = what([&] { attnum::require_out_outside_inputs(d / "model/out", {d / "model"}); });
  EXPECT_NE(m1.find("inside the input folder"), std::string::npos) << m1;
  const std::string m2 = what([&] { attnum::require_out_outside_inputs(d / "model", {d / "model"}); });
  EXPECT_NE(m2.find("is the input"), std::string::npos) << m2;
  const std::string m3 = what([&] { attnum::require_out_outside_inputs(d / "x/../q.npy", {d / "q.npy"}); });
  EXPECT_NE(m3.find("is the input"), std::string::npos) << m3;
  // Through a symlink too.
  fs::create_symlink(d / "model", d / "link");
  EXPECT_NE(what([&] { attnum::require_out_outside_inputs(d / "link/o", {d / "model"}); }), "");
  // Beside an input, or an input inside --out (shards merged into their parent): allowed.
  EXPECT_NO_THROW(attnum::require_out_outside_inputs(d / "out", {d / "model", d / "q.npy", ""}));
  EXPECT_NO_THROW(attnum::require_out_outside_inputs(d, {d / "model/s0"}));
  EXPECT_NO_THROW(attnum::require_out_outside_inputs(d / "modelx", {d / "model"}));
  fs::remove_all(d);
}

TEST(file_test, private_temp_dirs_of_killed_runs_are_removed_by_their_lock_record) {
  const fs::path tmp = fs::temp_directory_path();
  const std::string dead = "attnum-heads-00000000deadbeef";
  // A killed run's folder: named with its token, which its (unlocked) lock file records.
  put(tmp / dead / attnum::kLockFile, "00000000deadbeef\n");
  put(tmp / dead / "checkpoints/unit-000000.jsonl", "x");
  // Folders that look alike but are not ours: no lock file, or one recording another token.
  const std::vector<std::string> keep = {"attnum-heads-00000000deadbee0", "attnum-heads-00000000deadbee1",
                                         "attnum-heads-2147483646"};
  put(tmp / keep[0] / "made-by-this-test", "");
  put(tmp / keep[1] / attnum::kLockFile, "1111111111111111\n");
  put(tmp / keep[2] / "made-by-this-test", "");
  const fs::path mine = attnum::private_temp_dir("heads");
  EXPECT_EQ(mine, tmp / ("attnum-heads-" + attnum::run_token()));
  EXPECT_FALSE(fs::exists(mine)) << "begin_output_dir creates it";
  EXPECT_FALSE(fs::exists(tmp / dead));
  for (const auto& n : keep) {
    EXPECT_TRUE(fs::exists(tmp / n)) << n;
    fs::remove_all(tmp / n);
  }
}

TEST(file_test, completion_marker_lists_and_checks_every_file) {
  const fs::path d = fresh("marker");
  put(d / "rows.csv", "a,b\n1,2\n");
  put(d / "summary.json", "[]\n");
  EXPECT_NE(what([&] { attnum::require_complete(d, "report"); }).find("complete.json"), std::string::npos);
  attnum::write_complete_marker(d, "attnum heads --zoo");
  EXPECT_NO_THROW(attnum::require_complete(d, "report"));
  put(d / "rows.csv", "a,b\n1,3\n");  // changed after the marker
  EXPECT_NE(what([&] { attnum::require_complete(d, "report"); }).find("rows.csv"), std::string::npos);
  fs::remove(d / "rows.csv");  // gone after the marker
  EXPECT_NE(what([&] { attnum::require_complete(d, "merge"); }).find("rows.csv"), std::string::npos);
  fs::remove_all(d);
}

TEST(file_test, worker_errors_carry_the_first_exception_out_of_a_parallel_region) {
  attnum::worker_errors errors;
  int ran = 0;
#pragma omp parallel for schedule(dynamic, 1) reduction(+ : ran)
  for (int i = 0; i < 64; ++i)
    errors.run([&] {
      ++ran;
      if (i == 5) attnum::fail("unit {}: bad", i);
    });
  EXPECT_GE(ran, 1);
  EXPECT_NE(what([&] { errors.rethrow(); }).find("unit 5: bad"), std::string::npos);
  attnum::worker_errors none;
  EXPECT_NO_THROW(none.rethrow());
}

TEST(file_test, threads_are_capped_and_negative_refused) {
  EXPECT_NE(what([] { attnum::set_threads(-1); }).find("--threads -1"), std::string::npos);
  attnum::set_threads(1 << 20);
  EXPECT_LE(attnum::threads(), 1 << 12);
  attnum::set_threads(0);
}

}  // namespace
