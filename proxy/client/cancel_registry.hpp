// Maps the cancel keys pgtether gives its clients (BackendKeyData) to those clients.
//
// A CancelRequest arrives on a new connection, possibly at another worker than the client's, so
// this is the one piece of mutable state shared by all workers; a mutex guards it. Keys are random
// (pid and secret both), so a client cannot guess another client's key.
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <unordered_map>

#include "protocol/startup.hpp"

namespace pgtether {

class Client;
class Worker;

class CancelRegistry {
public:
    struct Entry {
        Worker* worker = nullptr;
        Client* client = nullptr;
    };

    // A fresh, unique key for a client; with peering (`peer_id` > 0) the key carries the peer id
    // as PgBouncer's do (core/peering.hpp).
    protocol::CancelKey add(Worker& worker, Client& client, int peer_id);
    void remove(const protocol::CancelKey& key);
    [[nodiscard]] std::optional<Entry> find(const protocol::CancelKey& key) const;

private:
    static std::uint64_t pack(const protocol::CancelKey& key) {
        return (std::uint64_t{static_cast<std::uint32_t>(key.pid)} << 32) |
               static_cast<std::uint32_t>(key.secret);
    }

    mutable std::mutex mutex_;
    std::unordered_map<std::uint64_t, Entry> entries_;
};

}  // namespace pgtether
