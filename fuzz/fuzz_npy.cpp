// .npy reader: magic, versions, the header dict, dtypes and the data size.
#include "attnum/io/npy.h"
#include "fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = attnum::fuzz::put("in.npy", {reinterpret_cast<const char*>(data), size});
  attnum::fuzz::expect_clean([&] { (void)attnum::io::read_npy(path); });
  attnum::fuzz::expect_clean([&] {
    std::vector<int64_t> shape;
    (void)attnum::io::read_npy_f64(path, shape);
  });
  return 0;
}
