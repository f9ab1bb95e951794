#pragma once
// Unicode NFC and NFKC normalization (UAX #15), normalizers of tokenizer.json (Qwen2's is NFC).
#include <string>
#include <string_view>

namespace attnum::model {

/// Returns the NFC form of UTF-8 text. Invalid UTF-8 bytes pass through unchanged.
std::string nfc(std::string_view utf8);

/// Returns the NFKC form of UTF-8 text (compatibility decomposition, then canonical composition).
/// Invalid UTF-8 bytes pass through unchanged.
std::string nfkc(std::string_view utf8);

}  // namespace attnum::model
