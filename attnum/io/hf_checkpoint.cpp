#include "attnum/io/hf_checkpoint.h"

#include "attnum/core/error.h"

namespace attnum::io {
model::config read_hf_config(const std::string& p) { fail("{}: Hugging Face configs not supported yet", p); }
model::weights load_hf_checkpoint(const std::string& dir) { fail("{}: Hugging Face folders not supported yet", dir); }
}  // namespace attnum::io

namespace attnum::model {
weights load_hf_folder(const std::string& dir) { return io::load_hf_checkpoint(dir); }
}  // namespace attnum::model
