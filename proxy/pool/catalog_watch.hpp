// The catalog watch of one database (docs/advisory-locks.md, "Freshness"): a long-lived side
// connection that tells lock discovery when the catalog moved, whoever moved it -- a migration
// on a direct connection, another pgtether instance, another worker.
//
// Once logged in it LISTENs on `pgtether_catalog` (the channel the optional event trigger of
// docs/advisory-locks.md notifies after every DDL command), then answers check() with the
// catalog's fingerprint (core/lock_discovery.hpp, catalog_fingerprint_query). One connection and
// one small query per interval per database, whatever the traffic: visible in pg_stat_activity
// as application_name "pgtether catalog watch". Owned by LockCatalog, which is told everything
// through the callbacks; the object frees itself once its connection is closed.
#pragma once

#include <functional>
#include <string>

#include "proxy/server/side_connection.hpp"

namespace pgtether {

class CatalogWatch final : public SideConnection {
  public:
    struct Events {
        std::function<void(std::string fingerprint)> fingerprint;  // the answer to check()
        std::function<void()> notified;                      // the event trigger's notification
        std::function<void(const std::string& why)> failed;  // the connection is closing
    };

    static constexpr const char* kChannel = "pgtether_catalog";

    // begin() starts it; `events.failed` may run from inside begin().
    static CatalogWatch* create(Worker& worker, Setup setup, Events events);
    using SideConnection::begin;

    // Logged in, listening, and no check running.
    [[nodiscard]] bool idle() const { return listening_ && ready(); }
    // Asks for the fingerprint; only when idle().
    void check();
    // Closes without calling back.
    void stop();

  private:
    CatalogWatch(Worker& worker, Setup setup, Events events);
    ~CatalogWatch() override = default;

    void on_logged_in() override;
    void on_answer(QueryResult&& answer, bool idle) override;
    void on_failed(const std::string& why, bool during_query) override;
    bool on_notification(protocol::ByteSpan body) override;

    Events events_;
    bool listening_ = false;
};

}  // namespace pgtether
