#include "attnum/core/error.h"
#include "attnum/model/tokenizer.h"

namespace attnum::model {
std::unique_ptr<tokenizer> load_hf_tokenizer(const std::string& path) {
  fail("{}: Hugging Face tokenizers not supported yet", path);
}
}  // namespace attnum::model
