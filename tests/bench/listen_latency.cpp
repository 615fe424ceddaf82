// LISTEN/NOTIFY delivery benchmark (tests/bench/listen.sh; docs/benchmarks.md): N listeners on C
// channels connected to LISTENER_CONNINFO (PostgreSQL directly or a pooler), a producer on
// PRODUCER_CONNINFO sending RATE notifications a second in batches of one transaction every 10 ms,
// each payload carrying its send time. Prints READY once every listener listens, waits
// --settle seconds (the caller reads memory then), produces for --seconds, drains, and prints one
// line: deliveries, the deliveries expected, and the delivery latency's p50, p99 and maximum.
//
// One thread reads every listener (epoll over libpq's sockets, non-blocking); the producer is its
// own thread. Not a test: run by listen.sh.
#include <libpq-fe.h>
#include <sys/epoll.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

std::int64_t now_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

[[noreturn]] void die(const std::string& why) {
    std::fprintf(stderr, "listen_latency: %s\n", why.c_str());
    std::exit(1);
}

struct Options {
    std::string listener_conninfo;
    std::string producer_conninfo;
    int listeners = 1000;
    int channels = 10;
    int rate = 5000;
    int seconds = 20;
    int settle = 3;
};

Options parse(int argc, char** argv) {
    Options o;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        auto value = [&]() -> std::string {
            if (i + 1 >= argc) die("missing value after " + a);
            return argv[++i];
        };
        if (a == "--listen") o.listener_conninfo = value();
        else if (a == "--produce") o.producer_conninfo = value();
        else if (a == "--listeners") o.listeners = std::stoi(value());
        else if (a == "--channels") o.channels = std::stoi(value());
        else if (a == "--rate") o.rate = std::stoi(value());
        else if (a == "--seconds") o.seconds = std::stoi(value());
        else if (a == "--settle") o.settle = std::stoi(value());
        else die("unknown option " + a);
    }
    if (o.listener_conninfo.empty() || o.producer_conninfo.empty()) die("--listen and --produce are needed");
    return o;
}

PGconn* connect(const std::string& conninfo) {
    PGconn* conn = PQconnectdb(conninfo.c_str());
    if (PQstatus(conn) != CONNECTION_OK) die(std::string("connect: ") + PQerrorMessage(conn));
    return conn;
}

void exec_ok(PGconn* conn, const std::string& sql) {
    PGresult* r = PQexec(conn, sql.c_str());
    const auto status = PQresultStatus(r);
    if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK) {
        die(sql + ": " + PQerrorMessage(conn));
    }
    PQclear(r);
}

}  // namespace

int main(int argc, char** argv) {
    const Options o = parse(argc, argv);
    std::vector<PGconn*> listeners;
    const int epoll = epoll_create1(0);
    for (int i = 0; i < o.listeners; ++i) {
        PGconn* conn = connect(o.listener_conninfo);
        exec_ok(conn, "LISTEN bench_ch" + std::to_string(i % o.channels));
        PQsetnonblocking(conn, 1);
        epoll_event ev{};
        ev.events = EPOLLIN;
        ev.data.u32 = static_cast<std::uint32_t>(i);
        if (epoll_ctl(epoll, EPOLL_CTL_ADD, PQsocket(conn), &ev) != 0) die("epoll_ctl");
        listeners.push_back(conn);
    }
    std::printf("READY %d\n", o.listeners);
    std::fflush(stdout);
    std::this_thread::sleep_for(std::chrono::seconds(o.settle));

    // The producer: a batch per 10 ms, one transaction each.
    const int batch = std::max(1, o.rate / 100);
    std::atomic<bool> producing{true};
    std::atomic<long> produced{0};
    std::thread producer([&] {
        PGconn* conn = connect(o.producer_conninfo);
        auto next = std::chrono::steady_clock::now();
        const auto end = next + std::chrono::seconds(o.seconds);
        while (std::chrono::steady_clock::now() < end) {
            // Distinct payloads: PostgreSQL folds identical notifications of one transaction.
            exec_ok(conn, "SELECT count(pg_notify('bench_ch' || (i % " + std::to_string(o.channels) +
                              "), '" + std::to_string(now_ns()) + ":' || i)) FROM generate_series(0, " +
                              std::to_string(batch - 1) + ") i");
            produced += batch;
            next += std::chrono::milliseconds(10);
            std::this_thread::sleep_until(next);
        }
        PQfinish(conn);
        producing = false;
    });

    std::vector<std::int64_t> latencies;
    latencies.reserve(static_cast<std::size_t>(o.rate) * o.seconds * (o.listeners / o.channels + 1));
    std::int64_t drain_until = 0;
    epoll_event events[256];
    while (true) {
        if (!producing && drain_until == 0) drain_until = now_ns() + 2'000'000'000;
        if (drain_until != 0 && now_ns() > drain_until) break;
        const int n = epoll_wait(epoll, events, 256, 50);
        for (int e = 0; e < n; ++e) {
            PGconn* conn = listeners[events[e].data.u32];
            if (!PQconsumeInput(conn)) die(std::string("listener: ") + PQerrorMessage(conn));
            while (PGnotify* note = PQnotifies(conn)) {
                const std::int64_t sent = std::strtoll(note->extra, nullptr, 10);
                latencies.push_back(now_ns() - sent);
                PQfreemem(note);
            }
        }
    }
    producer.join();
    const long expected = produced.load() * (o.listeners / o.channels);
    std::sort(latencies.begin(), latencies.end());
    auto at = [&](double q) -> double {
        if (latencies.empty()) return 0;
        return static_cast<double>(latencies[static_cast<std::size_t>(q * (latencies.size() - 1))]) / 1e6;
    };
    std::printf("delivered %zu expected %ld p50_ms %.3f p99_ms %.3f max_ms %.3f\n", latencies.size(),
                expected, at(0.5), at(0.99), at(1.0));
    for (PGconn* conn : listeners) PQfinish(conn);
    return 0;
}
