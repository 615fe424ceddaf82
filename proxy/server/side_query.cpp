#include "proxy/server/side_query.hpp"

namespace pgtether {

SideQuery* SideQuery::create(ServerContext& context, Request request, Callback done) {
    return new SideQuery(context, std::move(request), std::move(done));
}

SideQuery::SideQuery(ServerContext& context, Request request, Callback done)
    : SideConnection(context, Setup{std::move(request.database), std::move(request.credentials),
                                   std::move(request.application_name), "", request.max_message,
                                   ResultLimits{request.max_rows, request.max_row_bytes},
                                   request.host_index}),
      query_(std::move(request.query)),
      params_(std::move(request.params)),
      done_(std::move(done)) {}

void SideQuery::cancel() {
    done_ = nullptr;
    abandon();
}

void SideQuery::on_logged_in() {
    run(query_, params_);
}

void SideQuery::on_answer(QueryResult&& answer, bool idle) {
    (void)idle;  // the connection closes either way
    Result result;
    if (answer.failed) result.query_error = answer.error_text();
    result.rows = std::move(answer.rows);
    result.row_count = answer.row_count;
    finish(std::move(result));
}

void SideQuery::on_failed(const std::string& why, bool during_query) {
    (void)during_query;
    Result result;
    result.error = why;
    finish(std::move(result));
}

void SideQuery::finish(Result&& result) {
    Callback done = std::move(done_);
    done_ = nullptr;
    abandon();
    if (done) done(std::move(result));
}

}  // namespace pgtether
