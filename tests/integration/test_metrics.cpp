// The metrics endpoint: scraped over HTTP while real clients run queries and take advisory locks
// through pgtether. Every scrape is parsed strictly (Prometheus text format 0.0.4 or OpenMetrics
// 1.0), so a malformed exposition fails the test, not just a missing number.
#include <doctest/doctest.h>

#include <cctype>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/integration/support/admin.hpp"
#include "tests/integration/support/pooler.hpp"
#include "tests/integration/support/pq.hpp"
#include "tests/integration/support/process.hpp"
#include "tests/integration/support/raw_socket.hpp"
#include "tests/integration/support/test_env.hpp"

using namespace pgtether::itest;
using namespace std::chrono_literals;

namespace {

// A parsed exposition: sample name + sorted labels ("name{a="x",b="y"}") -> value.
struct Exposition {
    std::map<std::string, double> samples;
    std::map<std::string, std::string> types;  // family -> type
};

bool valid_name(const std::string& name) {
    if (name.empty() || std::isdigit(static_cast<unsigned char>(name[0]))) return false;
    for (char c : name) {
        if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != ':') return false;
    }
    return true;
}

// Parses and checks the exposition; failures are reported with the offending line.
Exposition parse_exposition(const std::string& text, bool openmetrics) {
    Exposition out;
    std::istringstream in(text);
    std::string line;
    bool saw_eof = false;
    int number = 0;
    while (std::getline(in, line)) {
        ++number;
        CAPTURE(number);
        CAPTURE(line);
        REQUIRE_FALSE(saw_eof);  // nothing after # EOF
        if (line == "# EOF") {
            saw_eof = true;
            continue;
        }
        if (line.rfind("# HELP ", 0) == 0) continue;
        if (line.rfind("# TYPE ", 0) == 0) {
            std::istringstream fields(line.substr(7));
            std::string family;
            std::string type;
            fields >> family >> type;
            CHECK(valid_name(family));
            bool known_type = type == "gauge" || type == "counter" || type == "summary" ||
                              type == "histogram";
            CHECK(known_type);
            if (openmetrics && type == "counter") {
                bool suffixed = family.size() >= 6 && family.substr(family.size() - 6) == "_total";
                CHECK_FALSE(suffixed);
            }
            out.types[family] = type;
            continue;
        }
        REQUIRE(!line.empty());
        REQUIRE(line[0] != '#');
        // name{labels} value
        std::size_t brace = line.find('{');
        std::size_t space = line.rfind(' ');
        REQUIRE(space != std::string::npos);
        std::string name = line.substr(0, std::min(brace, space));
        CHECK(valid_name(name));
        std::map<std::string, std::string> labels;
        if (brace != std::string::npos && brace < space) {
            std::size_t close = line.rfind('}', space);
            REQUIRE(close != std::string::npos);
            std::string body = line.substr(brace + 1, close - brace - 1);
            std::size_t i = 0;
            while (i < body.size()) {
                std::size_t eq = body.find('=', i);
                REQUIRE(eq != std::string::npos);
                std::string label = body.substr(i, eq - i);
                CHECK(valid_name(label));
                REQUIRE(body[eq + 1] == '"');
                std::string value;
                std::size_t j = eq + 2;
                for (; j < body.size() && body[j] != '"'; ++j) {
                    if (body[j] == '\\') ++j;
                    value += body[j];
                }
                REQUIRE(j < body.size());
                labels[label] = value;
                i = j + 1;
                if (i < body.size()) {
                    REQUIRE(body[i] == ',');
                    ++i;
                }
            }
        }
        // The sample belongs to a declared family.
        std::string family = name;
        for (const char* suffix : {"_total", "_sum", "_count", "_bucket"}) {
            std::string s = suffix;
            if (out.types.count(family) == 0 && family.size() > s.size() &&
                family.substr(family.size() - s.size()) == s) {
                family = family.substr(0, family.size() - s.size());
            }
        }
        bool declared = out.types.count(family) != 0 || out.types.count(name) != 0;
        CHECK_MESSAGE(declared, "sample of an undeclared family: " << name);
        std::string key = name + "{";
        bool first = true;
        for (const auto& [label, value] : labels) {
            key += (first ? "" : ",") + label + "=\"" + value + "\"";
            first = false;
        }
        key += "}";
        double value = std::stod(line.substr(space + 1));
        CHECK(out.samples.count(key) == 0);  // no duplicate series
        out.samples[key] = value;
    }
    CHECK(saw_eof == openmetrics);
    return out;
}

std::string pool_labels(const std::string& extra = "") {
    const auto& env = TestEnv::get();
    std::string labels = "database=\"" + env.database + "\"";
    if (!extra.empty()) labels += "," + extra;
    return labels + ",user=\"" + env.superuser + "\"";
}

double value_of(const Exposition& e, const std::string& name, const std::string& labels = "") {
    auto it = e.samples.find(name + "{" + labels + "}");
    return it == e.samples.end() ? 0.0 : it->second;
}

bool has(const Exposition& e, const std::string& name, const std::string& labels = "") {
    return e.samples.count(name + "{" + labels + "}") != 0;
}

// The value of the one pgtether_info{version="..."} sample (0 when absent).
double version_info(const Exposition& e) {
    double value = 0;
    int count = 0;
    for (const auto& [key, v] : e.samples) {
        if (key.rfind("pgtether_info{version=\"", 0) == 0) {
            value = v;
            ++count;
        }
    }
    return count == 1 ? value : 0;
}

MetricsPooler start_with_metrics() {
    PoolerConfig config;
    config.databases = {isolated_database("*")};
    config.settings = {{"pool_mode", "transaction"}, {"default_pool_size", "2"}};
    return pgtether::itest::start_with_metrics(config);
}

Exposition scrape(int port) {
    auto reply = http_get("127.0.0.1", port, "/metrics");
    REQUIRE_MESSAGE(reply.status == 200, reply.raw);
    CHECK(reply.headers["content-type"] == "text/plain; version=0.0.4; charset=utf-8");
    CHECK(reply.headers["content-length"] == std::to_string(reply.body.size()));
    CHECK(reply.headers["connection"] == "close");
    return parse_exposition(reply.body, false);
}

}  // namespace

TEST_CASE("the metrics endpoint serves numbers that follow the load") {
    auto started = start_with_metrics();
    Pgtether& pooler = *started.pooler;
    int port = started.port;
    Conn a = Conn::must(pooler.conninfo());
    PGT_REQUIRE_OK(a.exec("SELECT 1"));

    auto before = scrape(port);
    CHECK(version_info(before) == 1);
    CHECK(before.types.at("pgtether_queries_total") == "counter");
    CHECK(before.types.at("pgtether_query_duration_seconds") == "histogram");
    CHECK(before.types.at("pgtether_pool_clients") == "gauge");
    CHECK(value_of(before, "pgtether_pool_clients", pool_labels("state=\"idle\"")) == 1);
    CHECK(value_of(before, "pgtether_pool_servers", pool_labels("state=\"idle\"")) == 1);

    for (int i = 0; i < 10; ++i)
        PGT_REQUIRE_OK(a.exec("SELECT 1"));
    auto after = scrape(port);
    auto delta = [&](const std::string& name, const std::string& extra = "") {
        return value_of(after, name, pool_labels(extra)) -
               value_of(before, name, pool_labels(extra));
    };
    CHECK(delta("pgtether_queries_total") == 10);
    CHECK(delta("pgtether_transactions_total") == 10);
    CHECK(delta("pgtether_query_duration_seconds_count") == 10);
    CHECK(delta("pgtether_transaction_duration_seconds_count") == 10);
    CHECK(delta("pgtether_query_duration_seconds_sum") > 0);
    CHECK(delta("pgtether_client_wait_seconds_count") == 10);
    // Each Query message "SELECT 1" is 14 bytes on the wire (type, length, text, NUL).
    CHECK(delta("pgtether_received_bytes_total") == 10 * 14);
    CHECK(delta("pgtether_sent_bytes_total") > 0);

    // A transaction in progress: an active client on an active server.
    PGT_REQUIRE_OK(a.exec("BEGIN"));
    PGT_REQUIRE_OK(a.exec("SELECT 1"));
    auto in_tx = scrape(port);
    CHECK(value_of(in_tx, "pgtether_pool_clients", pool_labels("state=\"active\"")) == 1);
    CHECK(value_of(in_tx, "pgtether_pool_servers", pool_labels("state=\"active\"")) == 1);
    PGT_REQUIRE_OK(a.exec("COMMIT"));

    // The tether: a lock holder is counted until it lets go. A SELECT of lock calls only is
    // accounted exactly: tethered without a probe.
    PGT_REQUIRE_OK(a.exec("SELECT pg_advisory_lock(7077), pg_advisory_lock(7101, 7102)"));
    Exposition tethered;
    CHECK(eventually([&] {
        tethered = scrape(port);
        return value_of(tethered, "pgtether_pool_tethered_clients", pool_labels()) == 1;
    }));
    CHECK(value_of(tethered, "pgtether_pool_tethered_clients", pool_labels()) == 1);
    CHECK(value_of(tethered, "pgtether_pool_held_advisory_locks", pool_labels()) == 2);
    CHECK(value_of(tethered, "pgtether_tethers_total", pool_labels()) == 1);
    CHECK(value_of(tethered, "pgtether_lock_probes_total", pool_labels()) == 0);
    CHECK(value_of(tethered, "pgtether_lock_ledger_decisions_total", pool_labels()) == 1);
    // Any other shape is probed.
    PGT_REQUIRE_OK(a.exec("SELECT pg_advisory_unlock_all() FROM (SELECT 1) AS once"));
    CHECK(eventually([&] {
        auto e = scrape(port);
        return value_of(e, "pgtether_pool_tethered_clients", pool_labels()) == 0 &&
               value_of(e, "pgtether_untethers_total", pool_labels()) == 1 &&
               value_of(e, "pgtether_lock_probes_total", pool_labels()) == 1;
    }));

    // A lock holder that leaves: its backend is scrubbed.
    {
        Conn leaver = Conn::must(pooler.conninfo());
        PGT_REQUIRE_OK(leaver.exec("SELECT pg_advisory_lock(7078)"));
    }
    CHECK(eventually(
        [&] { return value_of(scrape(port), "pgtether_scrubs_total", pool_labels()) == 1; }));

    auto last = scrape(port);
    CHECK(value_of(last, "pgtether_client_connections") >= 1);
    CHECK(value_of(last, "pgtether_server_connections_opened_total") >= 1);
    CHECK(has(last, "pgtether_scrub_failures_total", pool_labels()));
    CHECK(has(last, "pgtether_leaks_found_total", pool_labels()));
    CHECK(has(last, "pgtether_pool_max_wait_seconds", pool_labels()));
    CHECK(value_of(last, "pgtether_paused") == 0);

    // The same numbers as the admin console's SHOW STATS.
    Conn admin = console(pooler);
    auto stats = find_row(admin.exec("SHOW STATS"), "database", TestEnv::get().database);
    REQUIRE(stats.has_value());
    auto now = scrape(port);
    CHECK(value_of(now, "pgtether_queries_total", pool_labels()) ==
          static_cast<double>(cell_int(*stats, "total_query_count")));
    CHECK(value_of(now, "pgtether_received_bytes_total", pool_labels()) ==
          static_cast<double>(cell_int(*stats, "total_received")));
}

// What alert rules divide by (docker/prometheus/pgtether-alerts.yaml): the configured limits,
// and the process's descriptors against its limit, each compared with the truth.
TEST_CASE("latency histograms: real query, transaction and wait times land in their buckets") {
    auto started = start_with_metrics();  // default_pool_size = 2
    Pgtether& pooler = *started.pooler;
    const int port = started.port;
    Conn a = Conn::must(pooler.conninfo());
    Conn b = Conn::must(pooler.conninfo());
    Conn c = Conn::must(pooler.conninfo());
    PGT_REQUIRE_OK(a.exec("SELECT 1"));
    auto before = scrape(port);
    const std::vector<std::string> le = {"0.0001", "0.00025", "0.0005", "0.001", "0.0025",
                                         "0.005",  "0.01",    "0.025",  "0.05",  "0.1",
                                         "0.25",   "0.5",     "1",      "2.5",   "5",
                                         "10",     "30",      "60",     "+Inf"};

    // Five fast queries and three of at least 30 ms, each its own transaction.
    for (int i = 0; i < 5; ++i) PGT_REQUIRE_OK(a.exec("SELECT 1"));
    for (int i = 0; i < 3; ++i) PGT_REQUIRE_OK(a.exec("SELECT pg_sleep(0.03)"));
    // One wait of at least 300 ms: both servers held in transactions, c queued until a commits.
    PGT_REQUIRE_OK(a.exec("BEGIN"));
    PGT_REQUIRE_OK(a.exec("SELECT 1"));
    PGT_REQUIRE_OK(b.exec("BEGIN"));
    PGT_REQUIRE_OK(b.exec("SELECT 1"));
    send_query(c, "SELECT 3");
    std::this_thread::sleep_for(300ms);
    PGT_REQUIRE_OK(a.exec("COMMIT"));
    auto c_result = wait_result(c, 5s);
    REQUIRE(c_result.has_value());
    PGT_REQUIRE_OK(*c_result);
    PGT_REQUIRE_OK(b.exec("COMMIT"));
    auto after = scrape(port);

    auto delta = [&](const std::string& name, const std::string& bound) {
        const std::string labels = bound.empty() ? pool_labels() : pool_labels("le=\"" + bound + "\"");
        return value_of(after, name, labels) - value_of(before, name, labels);
    };
    for (const char* family : {"pgtether_query_duration_seconds",
                               "pgtether_transaction_duration_seconds",
                               "pgtether_client_wait_seconds"}) {
        CAPTURE(family);
        CHECK(after.types.at(family) == "histogram");
        // Every bucket is there, counts never decrease with le, +Inf is _count.
        double previous = 0;
        for (const auto& bound : le) {
            CAPTURE(bound);
            REQUIRE(has(after, std::string(family) + "_bucket", pool_labels("le=\"" + bound + "\"")));
            double cumulative = value_of(after, std::string(family) + "_bucket",
                                         pool_labels("le=\"" + bound + "\""));
            CHECK(cumulative >= previous);
            previous = cumulative;
        }
        CHECK(previous == value_of(after, std::string(family) + "_count", pool_labels()));
    }
    const std::string query = "pgtether_query_duration_seconds";
    // 5 + 3 lone statements, a's and b's BEGIN, SELECT, COMMIT, and c's query.
    CHECK(delta(query + "_count", "") == 5 + 3 + 3 + 3 + 1);
    CHECK(delta(query + "_bucket", "+Inf") == 15);
    // The three sleeps took 30 ms or more: none is in a bucket up to 25 ms.
    CHECK(delta(query + "_bucket", "0.025") <= 15 - 3);
    CHECK(delta(query + "_sum", "") >= 0.09);
    const std::string xact = "pgtether_transaction_duration_seconds";
    CHECK(delta(xact + "_count", "") == 5 + 3 + 2 + 1);
    // a's transaction lasted the 300 ms c waited.
    CHECK(delta(xact + "_bucket", "0.25") <= 11 - 1);
    CHECK(delta(xact + "_bucket", "0.025") <= 11 - 4);
    const std::string wait = "pgtether_client_wait_seconds";
    // Every server handed to a client is one wait (most of 0 s); c's lasted 300 ms or more.
    CHECK(delta(wait + "_count", "") == 5 + 3 + 2 + 1);
    CHECK(delta(wait + "_bucket", "0.25") == delta(wait + "_count", "") - 1);
    CHECK(delta(wait + "_sum", "") >= 0.3);
}

TEST_CASE("the limits and the descriptor counts are exported, for ratios") {
    PoolerConfig config;
    config.databases = {isolated_database("*")};
    config.settings = {{"pool_mode", "transaction"}, {"default_pool_size", "3"},
                       {"reserve_pool_size", "2"}, {"tether_reserve_size", "4"},
                       {"max_client_conn", "77"}};
    auto started = pgtether::itest::start_with_metrics(config);
    Pgtether& pooler = *started.pooler;
    Conn a = Conn::must(pooler.conninfo());
    PGT_REQUIRE_OK(a.exec("SELECT 1"));

    auto e = scrape(started.port);
    CHECK(e.types.at("pgtether_max_client_conn") == "gauge");
    CHECK(value_of(e, "pgtether_max_client_conn") == 77);
    CHECK(value_of(e, "pgtether_pool_size", pool_labels()) == 3);
    CHECK(value_of(e, "pgtether_pool_reserve_size", pool_labels()) == 2);
    CHECK(value_of(e, "pgtether_pool_tether_reserve_size", pool_labels()) == 4);

    // The limit is the soft RLIMIT_NOFILE of the pgtether process, as /proc shows it.
    std::ifstream limits("/proc/" + std::to_string(pooler.pid()) + "/limits");
    std::string line;
    double soft = -1;
    while (std::getline(limits, line)) {
        if (line.rfind("Max open files", 0) == 0) {
            std::istringstream fields(line.substr(std::string("Max open files").size()));
            fields >> soft;
        }
    }
    REQUIRE(soft > 0);
    CHECK(value_of(e, "pgtether_process_max_fds") == soft);

    // Open descriptors follow the connections: 8 more clients, each with its socket.
    const auto fds_now = [&] {
        return static_cast<double>(std::distance(
            std::filesystem::directory_iterator("/proc/" + std::to_string(pooler.pid()) + "/fd"),
            std::filesystem::directory_iterator{}));
    };
    const double before = value_of(e, "pgtether_process_open_fds");
    CHECK(before > 0);
    CHECK(before <= fds_now() + 1);  // one more for the scrape's own socket, gone by now
    std::vector<Conn> more;
    for (int i = 0; i < 8; ++i) {
        more.push_back(Conn::must(pooler.conninfo()));
        PGT_REQUIRE_OK(more.back().exec("SELECT 1"));
    }
    auto after = scrape(started.port);
    // Eight more, give or take the descriptors that come and go on their own between the two
    // scrapes: a pooled server connection closed or opened by the janitor, a lock-catalog side
    // connection (with workers = 2 one came and went in CI: 30 after 23).
    CHECK(value_of(after, "pgtether_process_open_fds") >= before + 8 - 2);
    CHECK(value_of(after, "pgtether_process_open_fds") <= fds_now() + 2);
    CHECK(value_of(after, "pgtether_process_open_fds") < value_of(after, "pgtether_process_max_fds"));
}

TEST_CASE("each host of a host list has its state, role, back-off and failures") {
    // The first host refuses (nothing listens on its port), the second is the test server.
    const TestEnv& env = TestEnv::get();
    const int gone = free_port();
    PoolerConfig config;
    config.databases = {"hosts = host=" + env.pg_host + "," + env.pg_host + " port=" +
                        std::to_string(gone) + "," + std::to_string(env.pg_port) +
                        " dbname=" + env.database};
    config.settings = {{"pool_mode", "transaction"},
                       {"default_pool_size", "2"},
                       {"server_host_backoff", "60"}};
    auto started = pgtether::itest::start_with_metrics(config);
    Conn client = Conn::must(started.pooler->conninfo("", "hosts"));
    CHECK(scalar(client, "SELECT 1") == "1");
    // Keys as parse_exposition writes them: labels in name order.
    const auto labels = [&](int port, const std::string& role = "") {
        return "database=\"hosts\",host=\"" + env.pg_host + "\",port=\"" +
               std::to_string(port) + "\"" + (role.empty() ? "" : ",role=\"" + role + "\"") +
               ",user=\"" + env.superuser + "\"";
    };
    auto e = scrape(started.port);
    // The server that answered: up, a primary, nothing skipped.
    CHECK(value_of(e, "pgtether_host_up", labels(env.pg_port)) == 1);
    CHECK(value_of(e, "pgtether_host_role", labels(env.pg_port, "primary")) == 1);
    CHECK(value_of(e, "pgtether_host_backoff_seconds", labels(env.pg_port)) == 0);
    CHECK(value_of(e, "pgtether_host_failures", labels(env.pg_port)) == 0);
    // The one that refused (tried first or second, depending on the round-robin turn): skipped
    // for server_host_backoff, its failure counted, its role never seen.
    if (value_of(e, "pgtether_host_failures", labels(gone)) >= 1) {
        CHECK(value_of(e, "pgtether_host_up", labels(gone)) == 0);
        CHECK(value_of(e, "pgtether_host_role", labels(gone, "unknown")) == 1);
        CHECK(value_of(e, "pgtether_host_backoff_seconds", labels(gone)) > 50);
    } else {
        // Not tried yet: unknown, and not up either.
        CHECK(value_of(e, "pgtether_host_up", labels(gone)) == 0);
        CHECK(value_of(e, "pgtether_host_role", labels(gone, "unknown")) == 1);
    }
    CHECK(has(e, "pgtether_host_failures", labels(gone)));
}

TEST_CASE("OpenMetrics is served when the scraper asks for it") {
    auto started = start_with_metrics();
    Pgtether& pooler = *started.pooler;
    int port = started.port;
    Conn a = Conn::must(pooler.conninfo());
    PGT_REQUIRE_OK(a.exec("SELECT 1"));
    auto reply =
        http_get("127.0.0.1", port, "/metrics",
                 "Accept: application/openmetrics-text;version=1.0.0,text/plain;q=0.5\r\n");
    REQUIRE(reply.status == 200);
    CHECK(reply.headers["content-type"] ==
          "application/openmetrics-text; version=1.0.0; charset=utf-8");
    auto e = parse_exposition(reply.body, true);
    CHECK(e.types.at("pgtether_queries") == "counter");
    CHECK(value_of(e, "pgtether_queries_total", pool_labels()) >= 1);
}

TEST_CASE("the endpoint answers bad requests with HTTP errors and keeps serving") {
    auto started = start_with_metrics();
    Pgtether& pooler = *started.pooler;
    int port = started.port;
    CHECK(http_get("127.0.0.1", port, "/").status == 404);
    auto post =
        http_exchange("127.0.0.1", port, "POST /metrics HTTP/1.1\r\nContent-Length: 0\r\n\r\n");
    CHECK(post.status == 405);
    CHECK(post.headers["allow"] == "GET, HEAD");
    CHECK(http_exchange("127.0.0.1", port, "garbage\r\n\r\n").status == 400);
    CHECK(http_exchange("127.0.0.1", port,
                        "GET /metrics HTTP/1.1\r\nX: " + std::string(10000, 'a') + "\r\n\r\n")
              .status == 431);
    auto head = http_exchange("127.0.0.1", port, "HEAD /metrics HTTP/1.1\r\n\r\n");
    CHECK(head.status == 200);
    CHECK(head.body.empty());
    CHECK(std::stoul(head.headers["content-length"]) > 0);
    // A request split across packets.
    auto split = http_exchange("127.0.0.1", port, "GET /metr", 500ms);
    CHECK(split.status == 0);  // incomplete: no answer; the endpoint drops it later
    CHECK(version_info(scrape(port)) == 1);
    // PostgreSQL clients on the same process are unaffected.
    Conn a = Conn::must(pooler.conninfo());
    PGT_CHECK_OK(a.exec("SELECT 1"));
}

TEST_CASE("without metrics_listen_port there is no endpoint") {
    Pgtether pooler;
    Conn admin = console(pooler);
    auto port = find_row(admin.exec("SHOW CONFIG"), "key", "metrics_listen_port");
    REQUIRE(port.has_value());
    CHECK(cell(*port, "value") == "0");
    CHECK(pooler.log().find("metrics on") == std::string::npos);
}

// Issue 27, item 11, for the metrics endpoint: out of descriptors, libuv's accept path closed
// the queued scrapes without a word. Now it is the client listeners' Listener: logged, counted,
// paused, and the scrape is served once descriptors are free.
TEST_CASE("out of file descriptors: a scrape waits, is logged and counted, and is served") {
    PoolerConfig config = pool_config("transaction", 1, {{"max_client_conn", "500"}});
    config.fd_limit = 64;
    auto started = pgtether::itest::start_with_metrics(config);
    Pgtether& pooler = *started.pooler;
    // One scrape first, with descriptors to spare. Besides showing the endpoint serves, it lets
    // the sanitizer build's UBSan see the endpoint's types once: its vptr check needs a pipe(),
    // and at EMFILE it would report them as corrupt objects and stop pgtether.
    CHECK(value_of(scrape(started.port), "pgtether_accept_fd_exhausted_total") == 0);
    // More client connections than descriptors: pgtether accepts until it has none left.
    std::vector<std::unique_ptr<RawConn>> conns;
    for (int i = 0; i < 90; ++i) {
        conns.push_back(std::make_unique<RawConn>(pooler.host(), pooler.port()));
    }
    REQUIRE(pooler.wait_for_log("accept() failed: Too many open files; not accepting"));
    HttpReply during;
    std::thread scraper([&] {
        during = http_exchange("127.0.0.1", started.port,
                               "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
                               20s);
    });
    CHECK(pooler.wait_for_log("metrics endpoint: accept() failed: Too many open files; not "
                              "accepting new scrapes for 100 ms"));
    conns.clear();
    scraper.join();
    // The scrape stayed queued and was answered once descriptors were free again.
    CHECK_MESSAGE(during.status == 200, during.raw);
    CHECK(value_of(scrape(started.port), "pgtether_accept_fd_exhausted_total") >= 2);
}

TEST_CASE("idle half-sent requests neither block scrapes nor stay open (slowloris)") {
    auto started = start_with_metrics();
    int port = started.port;
    // As many idle connections as the endpoint takes at once, each with half a request head.
    std::vector<std::unique_ptr<RawConn>> idle;
    for (int i = 0; i < 64; ++i) {
        idle.push_back(std::make_unique<RawConn>("127.0.0.1", port));
        REQUIRE(idle.back()->send("GET /metr"));
    }
    // A scrape still gets in (it pushes out the oldest idle connection) and is answered.
    for (int i = 0; i < 3; ++i)
        CHECK(version_info(scrape(port)) == 1);
    // And 64 more: still nothing but room for a real request.
    for (int i = 0; i < 64; ++i) {
        idle.push_back(std::make_unique<RawConn>("127.0.0.1", port));
        idle.back()->send("GET /metr");
    }
    CHECK(version_info(scrape(port)) == 1);
    // A request head that does not arrive in time closes its connection: within seconds, not
    // after the 10-second limit of a whole exchange.
    RawConn slow("127.0.0.1", port);
    REQUIRE(slow.send("GET /metrics HTTP/1.1\r\n"));
    CHECK(slow.wait_closed(6s));
    for (auto& conn : idle)
        CHECK(conn->wait_closed(6s));
    CHECK(version_info(scrape(port)) == 1);
}

TEST_CASE("lock-wrapper discovery is counted per database") {
    auto started = start_with_metrics();
    Conn a = Conn::must(started.pooler->conninfo());
    PGT_REQUIRE_OK(a.exec("SELECT 1"));
    const std::string labels = "database=\"" + TestEnv::get().database + "\"";
    Exposition e;
    CHECK(eventually([&] {
        e = scrape(started.port);
        return value_of(e, "pgtether_lock_discovery_runs_total", labels) >= 1;
    }));
    CHECK(e.types.at("pgtether_lock_functions") == "gauge");
    CHECK(e.types.at("pgtether_lock_discovery_failures_total") == "counter");
    // The seven built-in lock functions at least (plus whatever the database defines).
    CHECK(value_of(e, "pgtether_lock_functions", labels) >= 7);
    CHECK(has(e, "pgtether_lock_functions_unknown", labels));
    CHECK(value_of(e, "pgtether_lock_discovery_failures_total", labels) == 0);
}
