// SCRAM keys of server logins with a plain password, remembered per worker thread.
//
// A server login with a plain password (auth_file, a [databases] password=) derives the client's
// SCRAM keys from the password with the server's salt and iteration count: PBKDF2 of
// scram_iterations rounds (4,096 by default, more if the role's secret says so), a millisecond or
// more on the event loop for every new server connection -- a reconnect storm after a
// PostgreSQL restart or a failover is hundreds of them. The keys depend on those three inputs
// only, and PostgreSQL keeps a role's salt until its password changes, so the last kCapacity
// results are kept (least recently used dropped first) and a login with the same three inputs
// skips the derivation. A changed password or salt simply misses.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "protocol/scram.hpp"

namespace pgtether {

class ScramKeyCache {
  public:
    static constexpr std::size_t kCapacity = 64;

    // The keys for `password` with `salt` and `iterations`: remembered, or derived now (and then
    // remembered). nullopt when the derivation fails.
    [[nodiscard]] std::optional<protocol::ScramClientKeys> keys(std::string_view password,
                                                                std::string_view salt,
                                                                int iterations);
    // Derivations done so far (the misses).
    [[nodiscard]] std::uint64_t derivations() const { return derivations_; }

  private:
    // SHA-256 of the three inputs: the cache keeps no copy of a password.
    using Id = std::array<std::uint8_t, 32>;
    struct Entry {
        Id id{};
        protocol::ScramClientKeys keys;
        std::uint64_t last_used = 0;
    };
    std::vector<Entry> entries_;
    std::uint64_t clock_ = 0;
    std::uint64_t derivations_ = 0;
};

// The calling thread's cache: each worker runs its loop on one thread, so it needs no lock.
[[nodiscard]] ScramKeyCache& this_threads_scram_key_cache();

}  // namespace pgtether
