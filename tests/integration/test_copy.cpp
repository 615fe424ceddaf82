// COPY through pgtether: more than 10 MB each way with the content verified by MD5 on both ends,
// CopyData messages from one byte to larger than any socket read (streamed, never assembled),
// COPY errors and CopyFail, and clients that vanish in the middle of a COPY: the backend they
// leave behind must come back clean (no open transaction, no rows, no leftover CopyData).
#include <doctest/doctest.h>
#include <sys/socket.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "tests/integration/support/helpers.hpp"
#include "tests/integration/support/pooler.hpp"
#include "tests/integration/support/pq.hpp"
#include "tests/integration/support/raw_socket.hpp"
#include "tests/integration/support/test_env.hpp"

using namespace pgtether::itest;

namespace {

PoolerConfig transaction_pool(int size) {
    return pool_config("transaction", size, {{"query_wait_timeout", "30"}});
}

// A table of our own for one test, dropped again at the end.
class Table {
  public:
    explicit Table(std::string name) : name_(std::move(name)) {
        Conn conn = Conn::must(direct_conninfo());
        conn.exec_ok("DROP TABLE IF EXISTS " + name_);
        conn.exec_ok("CREATE TABLE " + name_ + " (id int, payload text)");
    }
    ~Table() {
        try {
            Conn conn = Conn::must(direct_conninfo());
            conn.exec("DROP TABLE IF EXISTS " + name_);
        } catch (...) {
        }
    }
    [[nodiscard]] const std::string& name() const { return name_; }

  private:
    std::string name_;
};

// Row i of the generated data set, as PostgreSQL computes it: repeat(md5(i::text), 4).
std::string payload(int i) {
    std::string h = md5_hex(std::to_string(i));
    return h + h + h + h;
}

// COPY text-format line for row i.
std::string copy_line(int i) { return std::to_string(i) + "\t" + payload(i) + "\n"; }

// Sends `data` with PQputCopyData in chunks cycling through `sizes`; each call is one CopyData
// message, so rows are split across messages at arbitrary points (COPY allows that).
bool put_chunks(PGconn* pg, const std::string& data, const std::vector<std::size_t>& sizes) {
    std::size_t pos = 0;
    for (std::size_t k = 0; pos < data.size(); ++k) {
        std::size_t n = std::min(sizes[k % sizes.size()], data.size() - pos);
        if (PQputCopyData(pg, data.data() + pos, static_cast<int>(n)) != 1) return false;
        pos += n;
    }
    return true;
}

// Reads a whole COPY OUT; returns the bytes' MD5 and count, and the final result.
struct CopyOut {
    std::string md5;
    std::size_t bytes = 0;
    std::size_t messages = 0;
    Result result;
};
CopyOut read_copy_out(Conn& conn) {
    CopyOut out;
    Md5 md5;
    char* buffer = nullptr;
    int n;
    while ((n = PQgetCopyData(conn.raw(), &buffer, 0)) > 0) {
        md5.update(std::string_view(buffer, static_cast<std::size_t>(n)));
        out.bytes += static_cast<std::size_t>(n);
        ++out.messages;
        PQfreemem(buffer);
    }
    out.md5 = md5.hex();
    PGresult* res = PQgetResult(conn.raw());
    out.result = res ? Result::from(res) : Result::client_error(conn.error());
    PQclear(res);
    while (PGresult* extra = PQgetResult(conn.raw())) PQclear(extra);
    return out;
}

// Closes the client's socket under libpq without a Terminate message, as a crashed client would.
void vanish(Conn& conn) {
    shutdown(PQsocket(conn.raw()), SHUT_RDWR);
    conn.close();
}

constexpr int kRows = 80'000;  // 80,000 x ~135 bytes: about 10.8 MB

}  // namespace

TEST_CASE("COPY FROM STDIN: more than 10 MB arrive intact") {
    Pgtether pooler(transaction_pool(2));
    Table table("copy_in_big");
    Conn conn = Conn::must(pooler.conninfo());

    std::string data;
    data.reserve(static_cast<std::size_t>(kRows) * 140);
    for (int i = 1; i <= kRows; ++i) data += copy_line(i);
    // One row larger than any socket read, to be streamed through.
    const std::string huge(3'000'000, 'h');
    data += "-1\t" + huge + "\n";
    REQUIRE(data.size() > 10'000'000);

    Result start = conn.exec("COPY " + table.name() + " FROM STDIN");
    REQUIRE_MESSAGE(start.status == PGRES_COPY_IN, start.describe());
    REQUIRE(put_chunks(conn.raw(), data, {1, 7, 1000, 65'536, 1 << 20, 3, 200'000}));
    REQUIRE(PQputCopyEnd(conn.raw(), nullptr) == 1);
    PGresult* res = PQgetResult(conn.raw());
    Result done = Result::from(res);
    PQclear(res);
    while (PGresult* extra = PQgetResult(conn.raw())) PQclear(extra);
    REQUIRE_MESSAGE(done.status == PGRES_COMMAND_OK, done.describe());
    CHECK(done.command_tag == "COPY " + std::to_string(kRows + 1));

    // Checked directly: what the table holds is exactly what PostgreSQL computes for the data set.
    Conn direct = Conn::must(direct_conninfo());
    auto stored = direct.exec("SELECT count(*), md5(string_agg(id || ':' || payload, ',' ORDER BY "
                              "id)) FROM " + table.name() + " WHERE id > 0");
    auto expected = direct.exec(
        "SELECT count(*), md5(string_agg(i || ':' || repeat(md5(i::text), 4), ',' ORDER BY i)) "
        "FROM generate_series(1, " + std::to_string(kRows) + ") i");
    PGT_REQUIRE_OK(stored);
    PGT_REQUIRE_OK(expected);
    CHECK(stored.value(0, 0) == std::to_string(kRows));
    CHECK(stored.value(0, 1) == expected.value(0, 1));
    auto big = direct.exec("SELECT length(payload), md5(payload) FROM " + table.name() +
                           " WHERE id = -1");
    PGT_REQUIRE_OK(big);
    CHECK(big.value(0, 0) == std::to_string(huge.size()));
    CHECK(big.value(0, 1) == md5_hex(huge));
    // And the client's session carries on.
    CHECK(conn.transaction_status() == PQTRANS_IDLE);
    CHECK(scalar(conn, "SELECT count(*) FROM " + table.name()) == std::to_string(kRows + 1));
}

TEST_CASE("COPY TO STDOUT: more than 10 MB arrive intact, also while a COPY FROM runs alongside") {
    Pgtether pooler(transaction_pool(2));
    Table table("copy_side_in");
    Conn conn = Conn::must(pooler.conninfo());

    // A second client copies in at the same time on the other backend.
    std::atomic<bool> side_ok{false};
    std::thread side([&] {
        try {
            Conn other = Conn::must(pooler.conninfo());
            Result s = other.exec("COPY " + table.name() + " FROM STDIN");
            if (s.status != PGRES_COPY_IN) return;
            std::string data;
            for (int i = 1; i <= 20'000; ++i) data += copy_line(i);
            if (!put_chunks(other.raw(), data, {4096, 333})) return;
            if (PQputCopyEnd(other.raw(), nullptr) != 1) return;
            PGresult* res = PQgetResult(other.raw());
            side_ok = PQresultStatus(res) == PGRES_COMMAND_OK;
            PQclear(res);
            while (PGresult* extra = PQgetResult(other.raw())) PQclear(extra);
        } catch (...) {
        }
    });

    const std::string n = std::to_string(kRows);
    Result start = conn.exec("COPY (SELECT i, repeat(md5(i::text), 4) FROM generate_series(1, " +
                             n + ") i ORDER BY i) TO STDOUT");
    REQUIRE_MESSAGE(start.status == PGRES_COPY_OUT, start.describe());
    CopyOut got = read_copy_out(conn);
    side.join();
    CHECK_MESSAGE(got.result.status == PGRES_COMMAND_OK, got.result.describe());
    CHECK(got.result.command_tag == "COPY " + n);
    CHECK(got.messages == static_cast<std::size_t>(kRows));  // one CopyData per row

    Conn direct = Conn::must(direct_conninfo());
    auto expected = direct.exec(
        "SELECT sum(octet_length(line)), md5(string_agg(line, '' ORDER BY i)) FROM (SELECT i, "
        "i || E'\\t' || repeat(md5(i::text), 4) || E'\\n' AS line FROM generate_series(1, " +
        n + ") i) s");
    PGT_REQUIRE_OK(expected);
    CHECK(got.bytes > 10'000'000);
    CHECK(std::to_string(got.bytes) == expected.value(0, 0));
    CHECK(got.md5 == expected.value(0, 1));
    CHECK(side_ok);
    CHECK(scalar(conn, "SELECT count(*) FROM " + table.name()) == "20000");

    // One row much larger than a socket read.
    Result big = conn.exec("COPY (SELECT repeat('y', 4000000)) TO STDOUT");
    REQUIRE(big.status == PGRES_COPY_OUT);
    CopyOut huge = read_copy_out(conn);
    CHECK(huge.result.status == PGRES_COMMAND_OK);
    CHECK(huge.bytes == 4'000'001);
    CHECK(huge.md5 == md5_hex(std::string(4'000'000, 'y') + "\n"));
    CHECK(conn.transaction_status() == PQTRANS_IDLE);
}

TEST_CASE("COPY errors: bad data, CopyFail, COPY inside a transaction block") {
    Pgtether pooler(transaction_pool(1));
    Table table("copy_errors");
    Conn conn = Conn::must(pooler.conninfo());

    SUBCASE("bad data is reported and the connection stays usable") {
        REQUIRE(conn.exec("COPY " + table.name() + " FROM STDIN").status == PGRES_COPY_IN);
        std::string data = "1\tok\nnot-a-number\tbad\n";
        REQUIRE(PQputCopyData(conn.raw(), data.data(), static_cast<int>(data.size())) == 1);
        REQUIRE(PQputCopyEnd(conn.raw(), nullptr) == 1);
        PGresult* res = PQgetResult(conn.raw());
        Result r = Result::from(res);
        PQclear(res);
        while (PGresult* extra = PQgetResult(conn.raw())) PQclear(extra);
        PGT_CHECK_SQLSTATE(r, "22P02");
    }
    SUBCASE("the client aborts the COPY (CopyFail)") {
        REQUIRE(conn.exec("COPY " + table.name() + " FROM STDIN").status == PGRES_COPY_IN);
        std::string data = "1\tok\n";
        REQUIRE(PQputCopyData(conn.raw(), data.data(), static_cast<int>(data.size())) == 1);
        REQUIRE(PQputCopyEnd(conn.raw(), "changed my mind") == 1);
        PGresult* res = PQgetResult(conn.raw());
        Result r = Result::from(res);
        PQclear(res);
        while (PGresult* extra = PQgetResult(conn.raw())) PQclear(extra);
        PGT_CHECK_SQLSTATE(r, "57014");
        CHECK(r.message.find("changed my mind") != std::string::npos);
    }
    SUBCASE("COPY inside a transaction that is rolled back") {
        PGT_REQUIRE_OK(conn.exec("BEGIN"));
        REQUIRE(conn.exec("COPY " + table.name() + " FROM STDIN").status == PGRES_COPY_IN);
        std::string data = "1\tin-tx\n2\tin-tx\n";
        REQUIRE(PQputCopyData(conn.raw(), data.data(), static_cast<int>(data.size())) == 1);
        REQUIRE(PQputCopyEnd(conn.raw(), nullptr) == 1);
        PGresult* res = PQgetResult(conn.raw());
        CHECK(PQresultStatus(res) == PGRES_COMMAND_OK);
        PQclear(res);
        while (PGresult* extra = PQgetResult(conn.raw())) PQclear(extra);
        CHECK(conn.transaction_status() == PQTRANS_INTRANS);
        CHECK(scalar(conn, "SELECT count(*) FROM " + table.name()) == "2");
        PGT_REQUIRE_OK(conn.exec("ROLLBACK"));
    }
    CHECK(conn.transaction_status() == PQTRANS_IDLE);
    CHECK(scalar(conn, "SELECT count(*) FROM " + table.name()) == "0");
    // Another client gets the (only) backend in a clean state.
    Conn next = Conn::must(pooler.conninfo());
    CHECK(scalar(next, "SELECT 'clean'") == "clean");
}

TEST_CASE("a client vanishing mid-COPY never leaves a dirty backend") {
    // One backend: the next client necessarily gets the one the vanished client used. A clean-up
    // that stalls (instead of finishing or closing the backend) makes the next client wait past
    // query_wait_timeout and fail.
    PoolerConfig config = transaction_pool(1);
    config.settings["query_wait_timeout"] = "5";
    Pgtether pooler(config);
    Table table("copy_vanish");

    SUBCASE("mid COPY FROM STDIN, without Terminate") {
        Conn a = Conn::must(pooler.conninfo());
        REQUIRE(a.exec("COPY " + table.name() + " FROM STDIN").status == PGRES_COPY_IN);
        std::string data;
        for (int i = 1; i <= 1000; ++i) data += copy_line(i);
        data += "1001\tpartial row without its end";
        REQUIRE(PQputCopyData(a.raw(), data.data(), static_cast<int>(data.size())) == 1);
        REQUIRE(PQflush(a.raw()) == 0);
        vanish(a);
    }
    SUBCASE("mid COPY FROM STDIN inside a transaction, with Terminate") {
        Conn a = Conn::must(pooler.conninfo());
        PGT_REQUIRE_OK(a.exec("BEGIN"));
        PGT_REQUIRE_OK(a.exec("INSERT INTO " + table.name() + " VALUES (0, 'before')"));
        REQUIRE(a.exec("COPY " + table.name() + " FROM STDIN").status == PGRES_COPY_IN);
        std::string data = copy_line(1) + copy_line(2);
        REQUIRE(PQputCopyData(a.raw(), data.data(), static_cast<int>(data.size())) == 1);
        a.close();  // PQfinish sends Terminate in the middle of the COPY
    }
    SUBCASE("in the middle of one large CopyData message") {
        // Only part of a 1 MB CopyData arrives: the backend waits for the rest of that message,
        // so nothing pgtether could send it would be read as a new message.
        const TestEnv& env = TestEnv::get();
        RawConn raw(pooler.host(), pooler.port());
        auto hello = raw.startup(env.superuser, env.database);
        REQUIRE_MESSAGE((!hello.empty() && hello.back().type == 'Z'), wire::describe(hello));
        REQUIRE(raw.send(wire::query("COPY " + table.name() + " FROM STDIN")));
        auto reply = raw.read_message();
        REQUIRE(reply.has_value());
        REQUIRE(reply->type == 'G');  // CopyInResponse
        std::string partial = "d" + wire::i32(1'000'004) + std::string(100'000, 'z');
        REQUIRE(raw.send(partial));
        std::this_thread::sleep_for(200ms);  // let it reach the backend before we vanish
    }
    SUBCASE("mid COPY TO STDOUT of a large result") {
        Conn a = Conn::must(pooler.conninfo());
        Result start = a.exec(
            "COPY (SELECT i, repeat(md5(i::text), 8) FROM generate_series(1, 2000000) i) TO "
            "STDOUT");
        REQUIRE(start.status == PGRES_COPY_OUT);
        char* buffer = nullptr;
        REQUIRE(PQgetCopyData(a.raw(), &buffer, 0) > 0);
        PQfreemem(buffer);
        vanish(a);
    }

    Conn b = Conn::must(pooler.conninfo());
    // The first reply is ours: no CopyData or CommandComplete of the departed client's COPY.
    auto r = b.exec("SELECT 'clean', now() = statement_timestamp()");
    PGT_REQUIRE_OK(r);
    CHECK(r.value(0, 0) == "clean");
    CHECK(r.value(0, 1) == "t");  // a fresh transaction, not one left open
    CHECK(b.transaction_status() == PQTRANS_IDLE);
    CHECK(scalar(b, "SELECT count(*) FROM " + table.name()) == "0");
    // The abandoned COPY TO is not still running on the server.
    CHECK(eventually([] {
        return direct_scalar("SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'COPY (SELECT "
                             "i, repeat(md5(i::text), 8)%' AND state = 'active'") == "0";
    }));
    CHECK(pooler.running());
}
