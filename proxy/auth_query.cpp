#include "proxy/auth_query.hpp"

namespace pgtether {

AuthQuery* AuthQuery::create(Worker& worker, Target target, std::string user, Callback done) {
    auto* self = new AuthQuery();
    self->done_ = std::move(done);
    SideQuery::Request request;
    request.database = std::move(target.database);
    request.credentials = std::move(target.credentials);
    request.application_name = "pgtether auth_query";
    request.query = std::move(target.query);
    // The user name is a bound parameter: no quoting, no injection.
    request.params = {user};
    request.max_rows = 1;  // a second row is counted, and is an error
    self->query_ = SideQuery::create(worker, std::move(request),
                                     [self, user = std::move(user)](SideQuery::Result&& answer) {
                                         Callback callback = std::move(self->done_);
                                         delete self;
                                         if (callback) callback(interpret(std::move(answer), user));
                                     });
    return self;
}

void AuthQuery::begin() {
    query_->begin();
}

void AuthQuery::cancel() {
    query_->cancel();
    delete this;
}

AuthQuery::Result AuthQuery::interpret(SideQuery::Result&& answer, const std::string& user) {
    Result result;
    if (!answer.error.empty()) {
        result.error = std::move(answer.error);
    } else if (!answer.query_error.empty()) {
        result.error = "auth_query failed: " + answer.query_error;
    } else if (answer.row_count > 1) {
        result.error = "auth_query returned more than one row";
    } else if (answer.row_count == 0) {
        result.outcome = Result::Outcome::NotFound;
    } else if (answer.rows.front().size() < 2) {
        result.error = "auth_query must return two columns: user name and secret";
    } else if (const auto& secret = answer.rows.front()[1]; !secret || secret->empty()) {
        result.outcome = Result::Outcome::NoPassword;
    } else {
        result.outcome = Result::Outcome::Found;
        UserSecret found;
        found.user = user;
        found.secret = *secret;
        found.kind = classify_secret(found.secret);
        result.secret = std::move(found);
    }
    return result;
}

}  // namespace pgtether
