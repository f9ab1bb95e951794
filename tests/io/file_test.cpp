// core/file.h: names inside a folder, allocation limits, output guards, stale temp files and the
// completion marker (docs/reliability.md).
#include <gtest/gtest.h>
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

namespace fs = std::filesystem;

namespace {

fs::path fresh(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / ("attnum-file-test-" + std::to_string(::getpid()) + "-" + name);
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

void put(const fs::path& p, const std::string& s) {
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary) << s;
}

std::string what(auto&& f) {
  try {
    f();
  } catch (const attnum::error& e) {
    return e.what();
  }
  return "";
}

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

TEST(file_test, output_guard_removes_only_what_a_failed_run_created) {
  const fs::path d = fresh("guard");
  {  // a new folder goes whole
    attnum::output_guard g(d / "new");
    put(d / "new/a/b.txt", "x");
  }
  EXPECT_FALSE(fs::exists(d / "new"));
  put(d / "old/keep.txt", "earlier run");
  put(d / "old/checkpoints/unit-0.json", "{}");
  {
    attnum::output_guard g(d / "old");
    put(d / "old/checkpoints/unit-1.json", "{}");
    put(d / "old/rows.csv", "new");
  }
  EXPECT_TRUE(fs::exists(d / "old/keep.txt"));
  EXPECT_TRUE(fs::exists(d / "old/checkpoints/unit-0.json"));
  EXPECT_FALSE(fs::exists(d / "old/checkpoints/unit-1.json"));
  EXPECT_FALSE(fs::exists(d / "old/rows.csv"));
  {  // committed: everything stays
    attnum::output_guard g(d / "ok");
    put(d / "ok/r.csv", "x");
    g.commit();
  }
  EXPECT_TRUE(fs::exists(d / "ok/r.csv"));
  fs::remove_all(d);
}

TEST(file_test, stale_temp_files_of_dead_processes_are_removed) {
  const fs::path d = fresh("stale");
  put(d / "rows.csv.tmp.2147483646", "dead writer");
  put(d / "checkpoints/unit-3.json.tmp.2147483645", "dead writer");
  put(d / ("rows.csv.tmp." + std::to_string(::getppid())), "live writer");
  put(d / "notes.tmp.txt", "not a temp file of ours");
  attnum::begin_output_dir(d);
  EXPECT_FALSE(fs::exists(d / "rows.csv.tmp.2147483646"));
  EXPECT_FALSE(fs::exists(d / "checkpoints/unit-3.json.tmp.2147483645"));
  EXPECT_TRUE(fs::exists(d / ("rows.csv.tmp." + std::to_string(::getppid()))));
  EXPECT_TRUE(fs::exists(d / "notes.tmp.txt"));
  fs::remove_all(d);
}

TEST(file_test, private_temp_dirs_of_dead_processes_are_removed) {
  const fs::path tmp = fs::temp_directory_path();
  const std::string live = std::to_string(::getppid());
  const std::vector<std::string> stale = {"attnum-heads-2147483646", "attnum-heads-2147483645"};
  const std::vector<std::string> keep = {"attnum-heads-" + live, "attnum-heads-x2147483646",
                                         "attnum-other-2147483646", "attnum-heads-2147483646-1"};
  for (const auto& n : stale) fs::create_directories(tmp / n / "checkpoints");
  for (const auto& n : keep)
    if (!fs::exists(tmp / n)) fs::create_directories(tmp / n / "made-by-this-test");
  const fs::path mine = attnum::private_temp_dir("heads");
  EXPECT_EQ(mine, tmp / ("attnum-heads-" + std::to_string(::getpid())));
  EXPECT_FALSE(fs::exists(mine)) << "the folder is the caller's to create";
  for (const auto& n : stale) EXPECT_FALSE(fs::exists(tmp / n)) << n;
  for (const auto& n : keep) {
    EXPECT_TRUE(fs::exists(tmp / n)) << n;
    if (fs::exists(tmp / n / "made-by-this-test")) fs::remove_all(tmp / n);
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
