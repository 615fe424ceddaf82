// Base64 (RFC 4648 §4: standard alphabet, with '=' padding), as SCRAM uses it for salts, proofs and
// signatures (RFC 5802 §7) and PostgreSQL for the keys in a stored SCRAM secret.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace pgtether::protocol {

std::string base64_encode(std::string_view raw);

// Strict decoding: the length must be a multiple of 4, only alphabet characters with at most two
// '=' at the very end, and the unused bits of the last character must be zero (the canonical form,
// RFC 4648 §3.5). No whitespace is skipped. Every encoder we talk to (libpq, PostgreSQL, other
// drivers) produces the canonical form, so anything else is a malformed message. nullopt on invalid
// input; the empty string decodes to the empty string.
std::optional<std::string> base64_decode(std::string_view text);

}  // namespace pgtether::protocol
