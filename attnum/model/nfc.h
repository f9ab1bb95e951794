#pragma once
// Unicode NFC normalization (UAX #15), the normalizer of Qwen2's tokenizer.json.
#include <string>
#include <string_view>

namespace attnum::model {

/// Returns the NFC form of UTF-8 text. Invalid UTF-8 bytes pass through unchanged.
std::string nfc(std::string_view utf8);

}  // namespace attnum::model
