// Mapped files: the bytes as written, a read fallback (ATTNUM_NO_MMAP=1) with a notice and the same
// bytes, and a file truncated underneath a mapping ends the process with status 2 and a message,
// never a bare SIGBUS.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "attnum/io/mapped_file.h"

namespace {
namespace fs = std::filesystem;

fs::path write_file(const std::string& name, size_t n) {
  const fs::path p = fs::temp_directory_path() / ("attnum_mapped_" + name + "_" + std::to_string(::getpid()));
  std::ofstream f(p, std::ios::binary);
  for (size_t i = 0; i < n; ++i) f.put(char(i * 7 + 1));
  return p;
}

TEST(mapped_file_test, mapped_and_read_fallback_hold_the_same_bytes) {
  const size_t n = 3 * 4096 + 17;
  const fs::path p = write_file("bytes", n);
  for (bool no_mmap : {false, true}) {
    if (no_mmap) ::setenv("ATTNUM_NO_MMAP", "1", 1);
    testing::internal::CaptureStderr();
    attnum::io::mapped_file f(p.string());
    const std::string err = testing::internal::GetCapturedStderr();
    ::unsetenv("ATTNUM_NO_MMAP");
    EXPECT_EQ(f.mapped(), !no_mmap);
    EXPECT_EQ(err.find("not memory-mapped") != std::string::npos, no_mmap) << err;
    ASSERT_EQ(f.size(), n);
    int wrong = 0;
    for (size_t i = 0; i < n; ++i) wrong += f.data()[i] != uint8_t(i * 7 + 1);
    EXPECT_EQ(wrong, 0);
    attnum::io::mapped_file moved(std::move(f));  // ownership (munmap or delete[]) moves with it
    EXPECT_EQ(moved.mapped(), !no_mmap);
    EXPECT_EQ(moved.data()[5], uint8_t(36));
  }
  fs::remove(p);
}

TEST(mapped_file_test, a_file_truncated_under_its_mapping_exits_2_with_a_message) {
  const fs::path p = write_file("trunc", 8 * 4096);
  const fs::path err = p.string() + ".err";
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    std::freopen(err.c_str(), "w", stderr);
    attnum::io::report_mapped_file_faults();
    attnum::io::mapped_file f(p.string());
    fs::resize_file(p, 0);  // another process truncating the checkpoint
    volatile uint8_t sink = f.data()[6 * 4096];
    (void)sink;
    std::_Exit(0);  // not reached: the read above faults
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << "terminated by signal " << (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  EXPECT_EQ(WEXITSTATUS(status), 2);
  std::ifstream f(err);
  const std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("truncated or replaced while this run read it (SIGBUS)"), std::string::npos) << text;
  fs::remove(p), fs::remove(err);
}

}  // namespace
