#include "proxy/server/auth_query.hpp"

#include "proxy/server/auth_lookups.hpp"

namespace pgtether {

AuthQuery* AuthQuery::create(ServerContext& context, AuthLookups& owner, const Target& target,
                             std::size_t host_index) {
    return new AuthQuery(context, owner, target, host_index);
}

AuthQuery::AuthQuery(ServerContext& context, AuthLookups& owner, const Target& target,
                     std::size_t host_index)
    : SideConnection(context, Setup{target.database, target.credentials, "pgtether auth_query",
                                   "auth_user ", ServerLogin::kMaxMessage,
                                   // The secret is column 2 of the only row; more rows are only
                                   // counted (and refused).
                                   ResultLimits{1, 1 << 20}, host_index}),
      owner_(&owner) {}

void AuthQuery::close() {
    owner_ = nullptr;
    abandon();
}

void AuthQuery::run(const std::string& user, const std::string& query) {
    user_ = user;
    // The user name is a bound parameter: no quoting, no injection.
    SideConnection::run(query, {user_});
}

void AuthQuery::on_logged_in() {
    if (owner_) owner_->on_connection_ready(*this);
}

AuthQuery::Result AuthQuery::interpret(const QueryResult& answer) const {
    Result result;
    if (answer.failed) {
        result.error = "auth_query failed: " + answer.error_text();
    } else if (answer.row_count > 1) {
        result.error = "auth_query returned more than one row";
    } else if (answer.row_count == 1 && answer.rows.front().size() < 2) {
        result.error = "auth_query must return two columns: user name and secret";
    } else if (answer.row_count == 0) {
        result.outcome = Result::Outcome::NotFound;
    } else if (const auto& secret = answer.rows.front()[1]; !secret || secret->empty()) {
        result.outcome = Result::Outcome::NoPassword;
    } else {
        result.outcome = Result::Outcome::Found;
        UserSecret found;
        found.user = user_;
        found.secret = *secret;
        found.kind = classify_secret(found.secret);
        result.secret = std::move(found);
    }
    return result;
}

void AuthQuery::on_answer(QueryResult&& answer, bool idle) {
    Result result = interpret(answer);
    if (!idle) {
        // Reusable only when the query left nothing behind: a custom auth_query that opened a
        // transaction (or failed inside one) does not return to the pool.
        abandon();
    }
    if (owner_) owner_->on_lookup_done(*this, std::move(result));
    if (!idle) {
        if (owner_) owner_->on_connection_retired(*this);
        owner_ = nullptr;
        return;
    }
    if (owner_) owner_->on_connection_ready(*this);
}

void AuthQuery::on_failed(const std::string& why, bool during_query) {
    AuthLookups* owner = owner_;
    owner_ = nullptr;
    if (!owner) return;
    if (during_query) {
        Result result;
        result.outcome = Result::Outcome::Failed;
        result.error = why;
        owner->on_lookup_done(*this, std::move(result));
    }
    owner->on_connection_lost(*this, why);
}

}  // namespace pgtether
