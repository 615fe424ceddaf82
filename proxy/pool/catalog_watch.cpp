#include "proxy/pool/catalog_watch.hpp"

namespace pgtether {

CatalogWatch* CatalogWatch::create(ServerContext& context, Setup setup, Events events) {
    return new CatalogWatch(context, std::move(setup), std::move(events));
}

CatalogWatch::CatalogWatch(ServerContext& context, Setup setup, Events events)
    : SideConnection(context, std::move(setup)), events_(std::move(events)) {}

void CatalogWatch::on_logged_in() {
    // The channel name is a fixed identifier: nothing of anyone's is spliced in.
    run(std::string("LISTEN ") + kChannel, {});
}

void CatalogWatch::stop() {
    events_ = {};
    abandon();
}

void CatalogWatch::on_answer(QueryResult&& answer, bool idle) {
    // The one answer: to the LISTEN.
    if (answer.failed || !idle) {
        fail(answer.failed ? "LISTEN failed: " + answer.error_text()
                           : std::string("LISTEN left a transaction open"));
    }
}

void CatalogWatch::on_failed(const std::string& why, bool during_query) {
    (void)during_query;
    auto failed = std::move(events_.failed);
    events_ = {};
    if (failed) failed(why);
}

bool CatalogWatch::on_notification(protocol::ByteSpan body) {
    (void)body;  // only our channel is listened to; the payload (the command tag) is not needed
    if (events_.notified) events_.notified();
    return true;
}

}  // namespace pgtether
