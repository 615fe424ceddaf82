// The admin console's SHOW commands: result sets with PgBouncer 1.18's column names, order and
// types (checked against the real PgBouncer 1.18 in tests/integration/test_admin.cpp), pgtether's
// own columns appended at the end, and SHOW LOCKS. docs/admin.md describes every column.
#pragma once

#include <string>
#include <string_view>

#include "core/show_merge.hpp"

namespace pgtether {

class AdminContext;

enum class ShowOutcome {
    Done,         // RowDescription and DataRows were appended
    Unknown,      // not a SHOW subject: "invalid command"
};

// Who asks. Statement text (SHOW LOCKS' last_query) is a client's own business: admin_users see it
// whole, stats_users with its literals replaced by `?` (protocol/statement_redaction.hpp), as
// pg_stat_activity hides other roles' queries from the unprivileged.
enum class ShowAudience { Admin, Stats };

// SHOW `what` (lower-case) over this worker's own clients, servers and pools.
ShowOutcome collect_show(AdminContext& worker, std::string_view what, ShowAudience audience,
                         ShowTable& table);
// Appends the result of SHOW `what` (lower-case) to `out`, without the CommandComplete: with
// several workers, each collects its own rows on its own thread and the tables are merged
// (core/show_merge.hpp).
ShowOutcome append_show(AdminContext& worker, std::string_view what, ShowAudience audience,
                        std::string& out);

// SHOW HELP's text (the DETAIL of its NoticeResponse), in PgBouncer's layout.
std::string admin_help_text();

// The name under which the admin console's pseudo-database appears in SHOW output.
inline constexpr const char* kAdminDatabaseName = "pgbouncer";

}  // namespace pgtether
