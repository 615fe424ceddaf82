#include "proxy/server/scram_key_cache.hpp"

#include <openssl/evp.h>

#include <algorithm>
#include <string>

#include "proxy/net/log.hpp"

namespace pgtether {

namespace {

// A length-prefixed encoding, so that no two different triples hash the same input.
std::optional<std::array<std::uint8_t, 32>> id_of(std::string_view password,
                                                  std::string_view salt, int iterations) {
    std::string input;
    for (std::string_view part : {password, salt}) {
        input += std::to_string(part.size());
        input += ':';
        input += part;
    }
    input += std::to_string(iterations);
    std::array<std::uint8_t, 32> id{};
    unsigned int length = 0;
    if (EVP_Digest(input.data(), input.size(), id.data(), &length, EVP_sha256(), nullptr) != 1 ||
        length != id.size()) {
        OPENSSL_cleanse(input.data(), input.size());
        return std::nullopt;
    }
    OPENSSL_cleanse(input.data(), input.size());
    return id;
}

}  // namespace

std::optional<protocol::ScramClientKeys> ScramKeyCache::keys(std::string_view password,
                                                            std::string_view salt,
                                                            int iterations) {
    const auto id = id_of(password, salt, iterations);
    if (!id) return protocol::derive_scram_client_keys(password, salt, iterations);
    ++clock_;
    for (Entry& entry : entries_) {
        if (entry.id == *id) {
            entry.last_used = clock_;
            return entry.keys;
        }
    }
    auto derived = protocol::derive_scram_client_keys(password, salt, iterations);
    ++derivations_;
    if (!derived) return std::nullopt;
    spdlog::debug("SCRAM keys derived for a server login ({} iterations); kept for the next "
                  "logins with this password",
                  iterations);
    if (entries_.size() < kCapacity) {
        entries_.push_back({*id, *derived, clock_});
    } else {
        auto oldest = std::min_element(
            entries_.begin(), entries_.end(),
            [](const Entry& a, const Entry& b) { return a.last_used < b.last_used; });
        *oldest = Entry{*id, *derived, clock_};
    }
    return derived;
}

ScramKeyCache& this_threads_scram_key_cache() {
    thread_local ScramKeyCache cache;
    return cache;
}

}  // namespace pgtether
