#include "proxy/client/cancel_registry.hpp"

#include <openssl/rand.h>

#include <cstdlib>

#include "core/peering.hpp"

namespace pgtether {

protocol::CancelKey CancelRegistry::add(Worker& worker, Client& client, int peer_id) {
    std::lock_guard lock(mutex_);
    while (true) {
        std::uint32_t raw[2];
        if (RAND_bytes(reinterpret_cast<unsigned char*>(raw), sizeof raw) != 1) std::abort();
        // A positive "pid" looks like a real one to clients that print it (stamp_cancel_key
        // clears the sign bit, and writes the peer id in when there is one).
        protocol::CancelKey key = stamp_cancel_key(
            {static_cast<std::int32_t>(raw[0]), static_cast<std::int32_t>(raw[1])}, peer_id);
        if (key.pid == 0) continue;
        if (entries_.emplace(pack(key), Entry{&worker, &client}).second) return key;
    }
}

void CancelRegistry::remove(const protocol::CancelKey& key) {
    std::lock_guard lock(mutex_);
    entries_.erase(pack(key));
}

std::optional<CancelRegistry::Entry> CancelRegistry::find(const protocol::CancelKey& key) const {
    std::lock_guard lock(mutex_);
    auto it = entries_.find(pack(key));
    if (it == entries_.end()) return std::nullopt;
    return it->second;
}

}  // namespace pgtether
