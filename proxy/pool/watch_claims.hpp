// Which worker runs the catalog watch of each database (proxy/pool/catalog_watch.hpp): one watch
// per database and process, run by the first worker whose pool of the database logs in, and
// taken over by another worker when that one has no pool of it any more. Shared by the workers
// of a process (proxy/daemon/worker_group.hpp); claims are rare, so a mutex serves.
#pragma once

#include <cstddef>
#include <map>
#include <mutex>
#include <string>

namespace pgtether {

class WatchClaims {
  public:
    // Whether `worker` runs the watch of `database`: it did already, or nobody did and now it
    // does.
    bool claim(const std::string& database, std::size_t worker) {
        std::lock_guard lock(mutex_);
        return owners_.try_emplace(database, worker).first->second == worker;
    }
    // `worker` stops watching `database` (it has no pool of it any more, or is stopping).
    void release(const std::string& database, std::size_t worker) {
        std::lock_guard lock(mutex_);
        auto it = owners_.find(database);
        if (it != owners_.end() && it->second == worker) owners_.erase(it);
    }

  private:
    std::mutex mutex_;
    std::map<std::string, std::size_t> owners_;
};

}  // namespace pgtether
