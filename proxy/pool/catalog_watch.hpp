// The listener of one database's catalog watch (docs/advisory-locks.md, "Freshness"): a side
// connection that LISTENs on `pgtether_catalog`, the channel the optional event trigger of
// docs/advisory-locks.md notifies after every DDL command, so that a migration's wrapper is seen
// the moment it commits. Opened only while the catalog has that trigger (the catalog's
// fingerprint says so); the periodic checks themselves run on idle pooled backends
// (LockCatalog). Visible in pg_stat_activity as application_name "pgtether catalog watch". Owned
// by LockCatalog, which is told everything through the callbacks; the object frees itself once
// its connection is closed.
#pragma once

#include <functional>
#include <string>

#include "proxy/server/side_connection.hpp"

namespace pgtether {

class CatalogWatch final : public SideConnection {
  public:
    struct Events {
        std::function<void()> notified;                      // the event trigger's notification
        std::function<void(const std::string& why)> failed;  // the connection is closing
    };

    static constexpr const char* kChannel = "pgtether_catalog";

    // begin() starts it; `events.failed` may run from inside begin().
    static CatalogWatch* create(ServerContext& context, Setup setup, Events events);
    using SideConnection::begin;

    // Closes without calling back.
    void stop();

  private:
    CatalogWatch(ServerContext& context, Setup setup, Events events);
    ~CatalogWatch() override = default;

    void on_logged_in() override;
    void on_answer(QueryResult&& answer, bool idle) override;
    void on_failed(const std::string& why, bool during_query) override;
    bool on_notification(protocol::ByteSpan body) override;

    Events events_;
};

}  // namespace pgtether
