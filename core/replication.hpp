// Replication connections (protocol §55.4, "Streaming Replication Protocol"): a client whose
// start-up packet says `replication=true` (physical: pg_basebackup, pg_receivewal, a standby) or
// `replication=database` (logical: pg_recvlogical, a subscription) is passed through as PgBouncer
// 1.23+ does: it gets a backend of its own, opened for it with its own start-up parameters, and
// the bytes flow both ways unread until either side leaves (docs/session-state.md, "Replication
// connections"). Pure: what the start-up parameter means and what the backend is sent.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace pgtether {

enum class ReplicationMode { None, Physical, Logical };

// SHOW CLIENTS / SHOW SERVERS words, as PgBouncer's: "none", "physical", "logical".
[[nodiscard]] const char* replication_mode_name(ReplicationMode mode);

// The value of the `replication` start-up parameter as PostgreSQL reads it: "database" is
// logical, a boolean (PostgreSQL's parse_bool: true/false, on/off, yes/no, 1/0 and unambiguous
// prefixes, any case) physical or none; nullopt for anything else.
[[nodiscard]] std::optional<ReplicationMode> parse_replication_mode(std::string_view value);

// PostgreSQL's FATAL for a value it does not accept (22023), word for word.
[[nodiscard]] std::string invalid_replication_value_message(std::string_view value);
inline constexpr const char* kInvalidReplicationValueHint =
    "Valid values are: \"false\", 0, \"true\", 1, \"database\".";

// The start-up parameters of the backend opened for a replication client: the database entry's
// own (`entry`: user, database, and what the entry forces), then the replication mode, then the
// client's own parameters (application_name, options, any GUC) -- a walsender for physical
// replication accepts no SET, so they travel in the start-up packet. What the entry sets is not
// overridden by the client (PgBouncer's precedence for a forced user or database).
[[nodiscard]] std::vector<std::pair<std::string, std::string>> replication_startup_parameters(
    std::vector<std::pair<std::string, std::string>> entry, ReplicationMode mode,
    const std::vector<std::pair<std::string, std::string>>& client);

}  // namespace pgtether
