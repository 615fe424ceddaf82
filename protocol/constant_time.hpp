// Comparison of secrets without a timing side channel.
//
// A byte-by-byte compare that returns at the first difference tells an attacker how long a correct
// prefix is; password responses, SCRAM proofs and server signatures must be compared in time that
// depends only on their length (RFC 5802 §9 "Security Considerations").
#pragma once

#include <openssl/crypto.h>

#include <string_view>

namespace pgtether::protocol {

// True when `a` and `b` are byte-for-byte equal. The lengths are compared openly: they are public
// (fixed by the message format), only the contents are secret.
[[nodiscard]] inline bool constant_time_equal(std::string_view a, std::string_view b) {
    if (a.size() != b.size()) return false;
    if (a.empty()) return true;
    return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

}  // namespace pgtether::protocol
