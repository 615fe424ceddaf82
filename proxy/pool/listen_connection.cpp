#include "proxy/pool/listen_connection.hpp"

#include "proxy/pool/listen_hub.hpp"

namespace pgtether {

ListenConnection* ListenConnection::create(ServerContext& context, Setup setup, ListenHub& hub) {
    return new ListenConnection(context, std::move(setup), hub);
}

ListenConnection::ListenConnection(ServerContext& context, Setup setup, ListenHub& hub)
    : SideConnection(context, std::move(setup)), hub_(&hub) {}

void ListenConnection::stop() {
    hub_ = nullptr;
    abandon();
}

void ListenConnection::on_logged_in() {
    if (hub_) hub_->on_connected();
}

void ListenConnection::on_answer(QueryResult&& answer, bool idle) {
    if (!hub_) return;
    if (!idle && !answer.failed) {
        fail("LISTEN left a transaction open");
        return;
    }
    hub_->on_answer(!answer.failed, answer.failed ? answer.error_text() : std::string());
}

void ListenConnection::on_failed(const std::string& why, bool during_query) {
    (void)during_query;
    ListenHub* hub = hub_;
    hub_ = nullptr;
    if (hub) hub->on_failed(why);
}

void ListenConnection::on_messages_read() {
    if (hub_) hub_->send_deliveries();
}

bool ListenConnection::on_notification(protocol::ByteSpan body) {
    if (hub_) hub_->on_notification(body);
    return true;
}

}  // namespace pgtether
