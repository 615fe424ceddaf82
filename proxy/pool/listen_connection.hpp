// The listening connection of a ListenHub (proxy/pool/listen_hub.hpp): a side connection that
// runs the hub's LISTEN/UNLISTEN statements one at a time and passes every notification on.
// Visible in pg_stat_activity as application_name "pgtether listen". The object frees itself
// once its connection is closed.
#pragma once

#include <string>

#include "proxy/server/side_connection.hpp"

namespace pgtether {

class ListenHub;

class ListenConnection final : public SideConnection {
  public:
    // begin() starts it; the hub's on_failed may run from inside begin().
    static ListenConnection* create(ServerContext& context, Setup setup, ListenHub& hub);
    using SideConnection::begin;
    using SideConnection::ready;

    // Runs one statement of the hub's (a LISTEN or UNLISTEN of a quoted channel); only when
    // ready(). The hub hears of its end through on_answer.
    void run_statement(const std::string& sql) { run(sql, {}); }
    // Closes without calling back.
    void stop();
    using SideConnection::pause_reading;
    using SideConnection::resume_reading;

  private:
    ListenConnection(ServerContext& context, Setup setup, ListenHub& hub);
    ~ListenConnection() override = default;

    void on_logged_in() override;
    void on_answer(QueryResult&& answer, bool idle) override;
    void on_failed(const std::string& why, bool during_query) override;
    bool on_notification(protocol::ByteSpan body) override;
    void on_messages_read() override;

    ListenHub* hub_;
};

}  // namespace pgtether
