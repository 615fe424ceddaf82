#include "proxy/client/client_counts.hpp"

namespace pgtether {

namespace {

// Drops a name whose count reaches 0, so names of clients long gone (auto-databases, users
// of auth_query) do not pile up.
void decrement(std::map<std::string, int>& counts, const std::string& name) {
    auto it = counts.find(name);
    if (it == counts.end()) return;
    if (--it->second <= 0) counts.erase(it);
}

int count_of(const std::map<std::string, int>& counts, const std::string& name) {
    auto it = counts.find(name);
    return it == counts.end() ? 0 : it->second;
}

}  // namespace

std::pair<int, int> ClientCounts::add(const std::string& database, const std::string& user) {
    std::lock_guard lock(mutex_);
    return {++databases_[database], ++users_[user]};
}

void ClientCounts::remove(const std::string& database, const std::string& user) {
    std::lock_guard lock(mutex_);
    decrement(databases_, database);
    decrement(users_, user);
}

int ClientCounts::database_clients(const std::string& database) {
    std::lock_guard lock(mutex_);
    return count_of(databases_, database);
}

int ClientCounts::user_clients(const std::string& user) {
    std::lock_guard lock(mutex_);
    return count_of(users_, user);
}

}  // namespace pgtether
