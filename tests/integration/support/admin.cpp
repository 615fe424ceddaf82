#include "tests/integration/support/admin.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cctype>
#include <stdexcept>

#include <doctest/doctest.h>

namespace pgtether::itest {

Conn console(const PoolerProcess& pooler, const std::string& user, const std::string& database) {
    return Conn(pooler.conninfo(user, database));
}

std::string isolated_database(const std::string& name, const TestEnv& env) {
    return name + " = host=" + env.pg_host + " port=" + std::to_string(env.pg_port) +
           " dbname=postgres";
}

std::vector<NamedRow> named_rows(const Result& result) {
    std::vector<NamedRow> out;
    for (const auto& row : result.rows) {
        NamedRow named;
        for (std::size_t i = 0; i < result.columns.size() && i < row.size(); ++i) {
            named[result.columns[i]] = row[i];
        }
        out.push_back(std::move(named));
    }
    return out;
}

std::optional<NamedRow> find_row(const Result& result, const std::string& column,
                                 const std::string& value) {
    for (auto& row : named_rows(result)) {
        auto it = row.find(column);
        if (it != row.end() && it->second && *it->second == value) return row;
    }
    return std::nullopt;
}

std::string cell(const NamedRow& row, const std::string& column) {
    auto it = row.find(column);
    if (it == row.end()) throw std::runtime_error("no column " + column);
    if (!it->second) throw std::runtime_error("column " + column + " is NULL");
    return *it->second;
}

long long cell_int(const NamedRow& row, const std::string& column) {
    return std::stoll(cell(row, column));
}

HttpReply http_exchange(const std::string& host, int port, const std::string& request,
                        std::chrono::milliseconds timeout) {
    HttpReply reply;
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return reply;
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<std::uint16_t>(port));
    inet_pton(AF_INET, host.c_str(), &addr.sin_addr);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
        ::close(fd);
        return reply;
    }
    std::size_t sent = 0;
    while (sent < request.size()) {
        ssize_t n = ::send(fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
        if (n <= 0) break;
        sent += static_cast<std::size_t>(n);
    }
    auto deadline = std::chrono::steady_clock::now() + timeout;
    char buf[65536];
    while (true) {
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
            deadline - std::chrono::steady_clock::now());
        if (left <= 0ms) break;
        pollfd pfd{fd, POLLIN, 0};
        if (poll(&pfd, 1, static_cast<int>(left.count())) <= 0) break;
        ssize_t n = ::recv(fd, buf, sizeof buf, 0);
        if (n <= 0) break;
        reply.raw.append(buf, static_cast<std::size_t>(n));
    }
    ::close(fd);
    auto head_end = reply.raw.find("\r\n\r\n");
    if (reply.raw.rfind("HTTP/1.1 ", 0) != 0 || head_end == std::string::npos) return reply;
    reply.status = std::stoi(reply.raw.substr(9, 3));
    std::string head = reply.raw.substr(0, head_end);
    std::size_t pos = head.find("\r\n");
    while (pos != std::string::npos) {
        std::size_t next = head.find("\r\n", pos + 2);
        std::string line =
            head.substr(pos + 2, next == std::string::npos ? std::string::npos : next - pos - 2);
        auto colon = line.find(':');
        if (colon != std::string::npos) {
            std::string name = line.substr(0, colon);
            for (auto& c : name)
                c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
            std::string value = line.substr(colon + 1);
            while (!value.empty() && value.front() == ' ')
                value.erase(0, 1);
            reply.headers[name] = value;
        }
        pos = next;
    }
    reply.body = reply.raw.substr(head_end + 4);
    return reply;
}

HttpReply http_get(const std::string& host, int port, const std::string& path,
                   const std::string& extra_headers) {
    return http_exchange(
        host, port, "GET " + path + " HTTP/1.1\r\nHost: " + host + "\r\n" + extra_headers + "\r\n");
}

MetricsPooler start_with_metrics(PoolerConfig config) {
    for (int attempt = 1;; ++attempt) {
        MetricsPooler m;
        m.port = free_port();
        config.settings["metrics_listen_addr"] = "127.0.0.1";
        config.settings["metrics_listen_port"] = std::to_string(m.port);
        m.pooler = std::make_unique<Pgtether>(config);
        if (m.pooler->wait_for_log("metrics on http://") && m.pooler->running()) return m;
        REQUIRE_MESSAGE(attempt < 3, m.pooler->log());
    }
}

}  // namespace pgtether::itest
