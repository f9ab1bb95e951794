// attnum loss and capture through the CLI on stories260K (data/, in the repository): the JSON
// contract, --out files, and exit status 2 with a message for bad requests.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

namespace {
namespace fs = std::filesystem;
const std::string kData = std::string(ATTNUM_DATA_DIR) + "/";
// A public-domain book from a Debian package (scripts/setup installs it).
const std::string kBook = "/usr/share/gocode/src/github.com/pierrec/lz4/testdata/pg1661.txt";

struct result {
  int status;
  std::string out, err;
};

result run(const std::string& args) {
  const fs::path dir = fs::temp_directory_path() / ("attnum_loss_cli_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string cmd =
      std::string(ATTNUM_BINARY) + " " + args + " >" + (dir / "out").string() + " 2>" + (dir / "err").string();
  const int rc = std::system(cmd.c_str());
  auto slurp = [](const fs::path& p) {
    std::ifstream f(p);
    return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
  };
  result r{WEXITSTATUS(rc), slurp(dir / "out"), slurp(dir / "err")};
  fs::remove_all(dir);
  return r;
}

TEST(loss_cli_test, json_contract_out_files_and_errors) {
  const fs::path out = fs::temp_directory_path() / ("attnum_loss_out_" + std::to_string(::getpid()));
  const std::string model = " --model " + kData + "stories260K.bin";
  const std::string text = " --text " + kBook;
  result r = run("loss" + model + text +
                 " --tokens 64 --windows 2 --kernel fa3 --conditions plain,center "
                 "--json --out " +
                 out.string());
  ASSERT_EQ(r.status, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j.size(), 2u);
  for (const char* f :
       {"condition", "kernel", "n_labels", "ce_ref", "ce_variant", "ppl_ratio", "ppl_ratio_lo", "ppl_ratio_hi",
        "kl_mean", "top1_agreement", "dp_p50", "dp_p90", "dp_p99", "model", "reference"})
    EXPECT_TRUE(j[0].contains(f)) << f;
  EXPECT_EQ(j[0]["n_labels"], 128);
  EXPECT_EQ(j[1]["condition"], "center");
  EXPECT_EQ(nlohmann::json::parse(std::ifstream(out / "loss.json")), j);
  EXPECT_TRUE(fs::exists(out / "loss.csv"));
  // --json keeps its array; the paired rows are in DIR/loss_paired.json.
  const auto paired = nlohmann::json::parse(std::ifstream(out / "loss_paired.json"));
  ASSERT_EQ(paired.size(), 1u);
  for (const char* f : {"kernel", "condition_a", "condition_b", "n_labels", "delta_ce", "delta_ce_lo", "delta_ce_hi",
                        "delta_kl", "delta_top1", "block_length", "ci_method"})
    EXPECT_TRUE(paired[0].contains(f)) << f;
  EXPECT_EQ(paired[0]["condition_a"], "center");
  EXPECT_EQ(paired[0]["condition_b"], "plain");
  EXPECT_EQ(paired[0]["n_labels"], 128);
  EXPECT_NEAR(paired[0]["delta_ce"].get<double>(), j[1]["ce_variant"].get<double>() - j[0]["ce_variant"].get<double>(),
              1e-12);
  fs::remove_all(out);

  // Longer than the context: clamped to it with a message, as attnum study does (the window
  // count then refuses the short text, so nothing runs).
  r = run("loss" + model + text + " --tokens 1024 --windows 100000 --kernel fa3 --conditions plain");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("loss: 1024 tokens exceed stories260K's context of 512: using windows of 512"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("--windows 100000 x --tokens 512"), std::string::npos) << r.err;
  r = run("loss" + model + text + " --tokens 64 --windows 100000 --kernel fa3 --conditions plain");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("pg1661.txt"), std::string::npos) << r.err;
  r = run("loss" + model + text + " --tokens 64 --kernel nope --conditions plain");
  EXPECT_EQ(r.status, 2);
  r = run("loss" + model + " --token-ids " + kData + "stories260K_greedy_reference.txt --tokens 8 --kernel fa3");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("expected a non-negative integer id"), std::string::npos) << r.err;
}

TEST(loss_cli_test, save_reference_then_reference_file_give_the_same_files_and_resume) {
  const fs::path d = fs::temp_directory_path() / ("attnum_loss_ref_" + std::to_string(::getpid()));
  fs::remove_all(d);
  const std::string args = "loss --model " + kData + "stories260K.bin --text " + kBook +
                           " --tokens 64 --windows 2 --kernel fa3,sage1 --conditions plain,rotate";
  auto slurp = [](const fs::path& p) {
    std::ifstream f(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
  };
  const std::string ref = (d / "ref.safetensors").string();
  result r = run(args + " --out " + (d / "computed").string());
  ASSERT_EQ(r.status, 0) << r.err;
  r = run(args + " --save-reference " + ref + " --out " + (d / "saved").string());
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("reference logits of 2 windows saved to " + ref), std::string::npos) << r.err;
  EXPECT_NE(r.out.find("(logits read from " + ref + ")"), std::string::npos) << r.out;
  r = run(args + " --reference-file " + ref + " --out " + (d / "read").string());
  ASSERT_EQ(r.status, 0) << r.err;
  for (const char* f : {"loss.json", "loss.csv", "loss_paired.json", "loss_paired.csv"}) {
    EXPECT_EQ(slurp(d / "saved" / f), slurp(d / "computed" / f)) << f;
    EXPECT_EQ(slurp(d / "read" / f), slurp(d / "computed" / f)) << f;
  }
  // 2 windows x (64 x 512 fp32 logits + 64 ids) plus the header.
  EXPECT_GT(fs::file_size(ref), 2u * 64 * 513 * 4);
  // Checkpointed per kernel: a rerun resumes (nothing to compute) and writes the same files; a
  // rerun with the reference file into the computed folder is another study, refused.
  EXPECT_TRUE(fs::exists(d / "computed" / "fa3" / "checkpoints" / "loss-params.json"));
  r = run(args + " --out " + (d / "computed").string());
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(slurp(d / "computed" / "loss.json"), slurp(d / "read" / "loss.json"));
  r = run(args + " --reference-file " + ref + " --out " + (d / "computed").string());
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("field 'reference_logits' is null in the earlier run"), std::string::npos) << r.err;
  // Refusals, each before any work and with exit 2.
  const std::pair<std::string, std::string> refused[] = {
      {" --reference fp64 --reference-file " + ref, "reference bf16 -> this run fp64"},
      {" --linear-precision bf16 --reference-file " + ref, "linear_precision fp32 -> this run bf16"},
      {" --reference-file " + kData + "stories260K.bin", "--reference-file " + kData + "stories260K.bin"},
      {" --reference-file " + (d / "computed" / "loss.json").string(), "not safetensors"},
      {" --save-reference " + kBook, "--save-reference " + kBook + ": is the input"},
      {" --save-reference " + ref + " --reference-file " + ref, "not both"},
      {" --save-reference " + ref + " --shard 0/2 --out " + (d / "s").string(), "runs in one process"},
  };
  for (const auto& [extra, want] : refused) {
    r = run(args + extra);
    EXPECT_EQ(r.status, 2) << extra;
    EXPECT_NE(r.err.find(want), std::string::npos) << extra << ": " << r.err;
    EXPECT_TRUE(r.out.empty()) << extra;
  }
  r = run("loss --model " + kData + "stories260K.bin --text " + kBook +
          " --tokens 64 --windows 3 --kernel fa3 --conditions plain --reference-file " + ref);
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("none of its 2 windows has the input ids of " + kBook + " window 2"), std::string::npos)
      << r.err;
  fs::remove_all(d);
}

TEST(loss_cli_test, capture_loss_and_study_refuse_up_front_what_memory_cannot_hold) {
  // stories260K: a 1.06 MB checkpoint file (read whole), 0.53 MB of weights in bf16, and at 64
  // tokens 0.56-0.74 MB of forward activations (1 or 2 threads) plus the capture's Q/K/V or the
  // loss's reference logits. A limit of 1.18 MB reads the files and refuses each command before
  // any forward, naming the weights' and the activations' bytes, and writes nothing.
  const fs::path out = fs::temp_directory_path() / ("attnum_mem_" + std::to_string(::getpid()));
  fs::remove_all(out);
  ::setenv("ATTNUM_MAX_ALLOC_GIB", "0.0011", 1);
  const std::string model = " --model " + kData + "stories260K.bin --linear-precision bf16";
  const std::pair<std::string, std::string> cmds[] = {
      {"loss" + model + " --text " + kBook + " --tokens 64 --kernel fa3 --conditions plain --out " + out.string(),
       "loss: stories260K with windows of 64 tokens needs"},
      {"capture" + model + " --text " + kBook + " --tokens 64 --out " + out.string(),
       "capture: stories260K with 64 tokens needs"},
      {"study" + model + " --text " + kBook + " --tokens 64 --kernels fa3 --out " + out.string(),
       "study: stories260K with windows of 64 tokens needs"},
  };
  for (const auto& [args, want] : cmds) {
    const result r = run(args);
    EXPECT_EQ(r.status, 2) << args;
    EXPECT_NE(r.err.find(want), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("GiB as bf16, activations"), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(out)) << args;
  }
  ::unsetenv("ATTNUM_MAX_ALLOC_GIB");
}
}  // namespace
