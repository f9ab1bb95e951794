#pragma once
// SHA-256 (FIPS 180-4) for the report's assets: the content hashes checked against those recorded
// at build time, and the Content-Security-Policy hashes of the page's inline scripts.
#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace attnum::report {

/// Returns the 32-byte SHA-256 digest of `bytes`.
std::array<uint8_t, 32> sha256(std::string_view bytes);

/// Returns the digest as 64 lowercase hex digits.
std::string sha256_hex(std::string_view bytes);

/// Returns the digest in base64 (the form a CSP 'sha256-...' source takes).
std::string sha256_base64(std::string_view bytes);

}  // namespace attnum::report
