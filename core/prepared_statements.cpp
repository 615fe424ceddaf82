#include "core/prepared_statements.hpp"

#include <openssl/rand.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <stdexcept>

#include "core/statement_translation.hpp"

namespace pgtether {

namespace {
// Workers are threads: one counter for all of them.
std::atomic<std::size_t> process_client_statement_bytes{0};
}  // namespace

std::size_t client_statement_bytes_in_process() {
    return process_client_statement_bytes.load(std::memory_order_relaxed);
}

ClientStatements::Names::~Names() {
    process_client_statement_bytes.fetch_sub(bytes, std::memory_order_relaxed);
}

void ClientStatements::Names::add_bytes(std::size_t n) {
    bytes += n;
    process_client_statement_bytes.fetch_add(n, std::memory_order_relaxed);
}

void ClientStatements::Names::remove_bytes(std::size_t n) {
    bytes -= n;
    process_client_statement_bytes.fetch_sub(n, std::memory_order_relaxed);
}

StatementRegistry::StatementRegistry() {
    unsigned char random[8];
    if (RAND_bytes(random, sizeof random) != 1) {
        // Only at start-up (a worker's registry): the daemon refuses to run without it.
        throw std::runtime_error("cannot draw random bytes for prepared statement names");
    }
    char hex[2 * sizeof random + 1];
    for (std::size_t i = 0; i < sizeof random; ++i) {
        std::snprintf(hex + 2 * i, 3, "%02x", random[i]);
    }
    token_.assign(hex, 2 * sizeof random);
}

StatementPtr StatementRegistry::intern(std::string_view query,
                                       protocol::ByteSpan parameter_types, std::uint32_t effects,
                                       std::shared_ptr<const protocol::SqlScanner> scanned_with) {
    std::string key;
    key.reserve(parameter_types.size() + 1 + query.size());
    key.append(protocol::as_chars(parameter_types));
    key.push_back('\0');
    key.append(query);
    if (auto it = by_text_.find(key); it != by_text_.end()) {
        if (auto existing = it->second.lock()) return existing;
    }
    auto statement = std::make_shared<PreparedStatement>();
    statement->id = ++next_id_;
    statement->server_name = backend_statement_name(token_, statement->id);
    statement->query = std::string(query);
    statement->parameter_types = std::string(protocol::as_chars(parameter_types));
    statement->effects = effects;
    statement->scanned_with = std::move(scanned_with);
    if (effects & protocol::kEffectAdvisoryLock) {
        if (auto calls = protocol::parse_lock_select(query)) {
            statement->lock_calls = std::make_shared<const protocol::LockCalls>(std::move(*calls));
        }
    }
    by_text_[std::move(key)] = statement;
    // Forget texts nobody uses any more, now and then, so the registry stays as small as the
    // statements in use.
    if (++interned_since_sweep_ >= 1024) {
        interned_since_sweep_ = 0;
        std::erase_if(by_text_, [](const auto& entry) { return entry.second.expired(); });
    }
    return statement;
}

StatementPtr ClientStatements::find(std::string_view name) const {
    if (!by_name_) return nullptr;
    auto it = by_name_->map.find(name);
    return it == by_name_->map.end() ? nullptr : it->second;
}

void ClientStatements::add(std::string_view name, StatementPtr statement) {
    if (!by_name_) by_name_ = std::make_unique<Names>();
    by_name_->add_bytes(statement_bytes(*statement));
    auto it = by_name_->map.find(name);
    if (it != by_name_->map.end()) {
        by_name_->remove_bytes(statement_bytes(*it->second));
        it->second = std::move(statement);
    } else {
        by_name_->map.emplace(std::string(name), std::move(statement));
    }
}

StatementPtr ClientStatements::remove(std::string_view name) {
    if (!by_name_) return nullptr;
    auto it = by_name_->map.find(name);
    if (it == by_name_->map.end()) return nullptr;
    StatementPtr removed = std::move(it->second);
    by_name_->remove_bytes(statement_bytes(*removed));
    by_name_->map.erase(it);
    if (by_name_->map.empty()) by_name_.reset();
    return removed;
}

void ServerStatements::touch(const PreparedStatement& statement) {
    auto it = index_.find(statement.id);
    if (it != index_.end()) lru_.splice(lru_.begin(), lru_, it->second);
}

std::vector<StatementPtr> ServerStatements::add(StatementPtr statement, std::size_t capacity,
                                                const std::vector<std::uint64_t>& pinned,
                                                std::size_t byte_capacity) {
    std::vector<StatementPtr> evicted;
    if (contains(*statement)) {
        touch(*statement);
        return evicted;
    }
    auto id = statement->id;
    bytes_ += statement_bytes(*statement);
    lru_.push_front(std::move(statement));
    index_[id] = lru_.begin();
    // Evict from the cold end, skipping statements that queued messages still need.
    auto it = lru_.end();
    while ((index_.size() > capacity || bytes_ > byte_capacity) && it != lru_.begin()) {
        --it;
        const auto& candidate = *it;
        if (candidate->id == id ||
            std::find(pinned.begin(), pinned.end(), candidate->id) != pinned.end()) {
            continue;
        }
        evicted.push_back(candidate);
        bytes_ -= statement_bytes(*candidate);
        index_.erase(candidate->id);
        it = lru_.erase(it);
    }
    return evicted;
}

void ServerStatements::remove(const PreparedStatement& statement) {
    auto it = index_.find(statement.id);
    if (it == index_.end()) return;
    bytes_ -= statement_bytes(**it->second);
    lru_.erase(it->second);
    index_.erase(it);
}

void ServerStatements::clear() {
    lru_.clear();
    index_.clear();
    stale_.clear();
    bytes_ = 0;
}

void ServerStatements::mark_stale(StatementPtr statement) {
    remove(*statement);
    for (const auto& stale : stale_) {
        if (stale->id == statement->id) return;
    }
    stale_.push_back(std::move(statement));
}

void ServerStatements::mark_all_stale() {
    for (auto& statement : lru_) stale_.push_back(std::move(statement));
    lru_.clear();
    index_.clear();
    bytes_ = 0;
}

bool ServerStatements::take_stale(const PreparedStatement& statement) {
    auto it = std::find_if(stale_.begin(), stale_.end(),
                           [&](const StatementPtr& s) { return s->id == statement.id; });
    if (it == stale_.end()) return false;
    stale_.erase(it);
    return true;
}

std::vector<StatementPtr> ServerStatements::trim_stale(std::size_t capacity) {
    std::vector<StatementPtr> trimmed;
    while (!stale_.empty() && index_.size() + stale_.size() > capacity) {
        trimmed.push_back(std::move(stale_.back()));
        stale_.pop_back();
    }
    return trimmed;
}

}  // namespace pgtether
