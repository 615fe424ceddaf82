// What a RELOAD would change (core/config_diff.hpp): two loaded configurations in, the changes
// out, as --check and the reload log line print them.
#include <doctest/doctest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/config_diff.hpp"

using namespace pgtether;

namespace {

std::shared_ptr<const Config> config_of(const std::string& text) {
    const auto path = std::filesystem::temp_directory_path() /
                      ("pgtether-diff-" + std::to_string(getpid()) + ".ini");
    std::ofstream(path) << text;
    auto config = load_config(path.string());
    std::filesystem::remove(path);
    return config;
}

std::vector<std::string> described(const std::string& before, const std::string& after) {
    std::vector<std::string> out;
    for (const auto& change : diff_configs(*config_of(before), *config_of(after))) {
        out.push_back(change.describe());
    }
    return out;
}

}  // namespace

TEST_CASE("config diff: nothing changed, whatever the spelling") {
    const std::string a = "[pgbouncer]\npool_mode = transaction\ndefault_pool_size = 20\n";
    const std::string b = "[pgbouncer]\n; a comment\ndefault_pool_size=20\npool_mode=transaction\n";
    CHECK(described(a, b).empty());
    // The default spelled out is no change either.
    CHECK(described("[pgbouncer]\n", "[pgbouncer]\ndefault_pool_size = 20\n").empty());
}

TEST_CASE("config diff: [pgbouncer] settings, with the ones a reload cannot change marked") {
    struct Row {
        const char* before;
        const char* after;
        std::vector<std::string> changes;
    };
    const Row rows[] = {
        {"pool_mode = session", "pool_mode = transaction", {"pool_mode: session -> transaction"}},
        {"", "default_pool_size = 40", {"default_pool_size: 20 -> 40"}},
        {"query_wait_timeout = 120",
         "query_wait_timeout = 0.5",
         {"query_wait_timeout: 120 -> 0.5"}},
        {"listen_port = 6432",
         "listen_port = 6433",
         {"listen_port: 6432 -> 6433 (needs a restart: a RELOAD keeps the running value)"}},
        {"admin_users = a", "admin_users = a, b", {"admin_users: a -> a, b"}},
        {"application_name_add_host = 0",
         "application_name_add_host = 1",
         {"application_name_add_host: 0 -> 1"}},
        {"default_pool_size = 5\nmax_client_conn = 10",
         "default_pool_size = 6\nmax_client_conn = 11",
         {"default_pool_size: 5 -> 6", "max_client_conn: 10 -> 11"}},
    };
    for (const auto& row : rows) {
        CAPTURE(row.before);
        CAPTURE(row.after);
        CHECK(described(std::string("[pgbouncer]\n") + row.before + "\n",
                        std::string("[pgbouncer]\n") + row.after + "\n") == row.changes);
    }
}

TEST_CASE("config diff: [databases], [users] and [peers] entries added, removed and changed") {
    const std::string before =
        "[pgbouncer]\n[databases]\napp = host=a port=5432\nold = host=b\n"
        "* = host=c\n[users]\nbob = pool_mode=session\n[peers]\n1 = host=p1\n";
    const std::string after =
        "[pgbouncer]\n[databases]\napp = host=a2 port=5432\nnew = host=d dbname='my db'\n"
        "* = host=c\n[users]\nbob = pool_mode=transaction\n[peers]\n2 = host=p2\n";
    const std::vector<std::string> expected = {
        "[databases] app: host=a port=5432 -> host=a2 port=5432",
        "[databases] new: added (host=d dbname='my db')",
        "[databases] old: removed (was host=b)",
        "[users] bob: pool_mode=session -> pool_mode=transaction",
        "[peers] 1: removed (was host=p1)",
        "[peers] 2: added (host=p2)",
    };
    CHECK(described(before, after) == expected);
}

TEST_CASE("config diff: passwords are never shown, a changed one is still reported") {
    CHECK(redact_connstring("host=a password=secret user=u") == "host=a password=*** user=u");
    CHECK(redact_connstring("host=a password='se cret'") == "host=a password=***");
    CHECK(redact_connstring("unterminated='") == "unterminated='");
    auto changes = described("[pgbouncer]\n[databases]\napp = host=a password=one\n",
                             "[pgbouncer]\n[databases]\napp = host=a password=two\n");
    REQUIRE(changes.size() == 1);
    CHECK(changes[0] ==
          "[databases] app: host=a password=*** (password) -> host=a password=*** (password "
          "changed)");
    for (const auto& c : changes) {
        CHECK(c.find("one") == std::string::npos);
        CHECK(c.find("two") == std::string::npos);
    }
}

TEST_CASE("config diff: two files' own paths (SHOW CONFIG's conffile) are no change") {
    const auto dir = std::filesystem::temp_directory_path();
    const auto a = dir / ("pgtether-diff-a-" + std::to_string(getpid()) + ".ini");
    const auto b = dir / ("pgtether-diff-b-" + std::to_string(getpid()) + ".ini");
    std::ofstream(a) << "[pgbouncer]\npool_mode = session\n";
    std::ofstream(b) << "[pgbouncer]\npool_mode = session\n";
    auto running = load_config(a.string());
    auto next = load_config(b.string());
    std::filesystem::remove(a);
    std::filesystem::remove(b);
    CHECK(diff_configs(*running, *next).empty());
    // One the file itself names is a change, shown as written.
    CHECK(described("[pgbouncer]\n", "[pgbouncer]\nconffile = /etc/x.ini\n").size() == 1);
}
