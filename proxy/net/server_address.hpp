// Where a [databases] entry's connections go, by PgBouncer's rules; shared by pooled server
// connections and auth_query's side connections.
#pragma once

#include <sys/socket.h>
#include <uv.h>

#include <cstdint>
#include <string>

#include "core/config.hpp"
#include "proxy/net/stream.hpp"

namespace pgtether {

// The host the `turn`-th new connection goes to: host= may list several, used round robin as
// PgBouncer does (turn modulo the number of hosts). "" when host= is empty. Pooled servers pass
// the index Pool::choose_host picked by what it knows of the hosts (core/host_choice.hpp).
[[nodiscard]] std::string host_for_turn(const DatabaseConfig& db, std::uint64_t turn);
// The port of the host at `index` of the host list: port= names one for all, or one per host.
[[nodiscard]] int port_for_host(const DatabaseConfig& db, std::uint64_t index);

// A host that is empty or starts with '/' means a Unix socket: in that directory, or in
// unix_socket_dir (else /tmp) when empty. Returns the socket's path, or "" for a TCP host.
[[nodiscard]] std::string server_unix_socket_path(const std::string& host, int port,
                                                  const Config& config);

// An IPv4 or IPv6 literal host with `port` in `out`; false for a host name (resolve it).
[[nodiscard]] bool parse_ip_literal(const std::string& host, int port, sockaddr_storage& out);

// A connection that resolves a host name (pooled servers, side connections, cancel requests
// to a peer). The lookup runs on libuv's thread pool and holds a pointer to its owner until
// on_resolved, so the owner must not free itself while one is pending.
class ResolveClient {
public:
    // Called once per start_resolve that returned 0, on the loop's thread: the first address
    // found, or null and libuv's error (UV_EAI_NONAME when the lookup found nothing). The
    // request and libuv's result are freed already; `address` lives until the call returns.
    virtual void on_resolved(int status, const sockaddr* address) = 0;

protected:
    ~ResolveClient() = default;
};

// Starts resolving `host` for a TCP connection, at connection time as PgBouncer does;
// `owner.on_resolved` gets the outcome. Returns libuv's error code (0: started, the owner
// counts one pending resolve until on_resolved).
[[nodiscard]] int start_resolve(uv_loop_t* loop, ResolveClient& owner, const std::string& host,
                                int port);

// The first step of a side connection (auth_query lookups, lock discovery) to `host`:`port`:
// connects `stream` to the Unix socket or IP literal, or starts resolving the name for `owner`
// (which then counts one pending resolve, `resolving` = true, and connects with
// connect_side_tcp in on_resolved). Returns "" when started, else why not.
[[nodiscard]] std::string start_side_connect(Stream& stream, uv_loop_t* loop,
                                             const std::string& host, int port,
                                             const Config& config, ResolveClient& owner,
                                             bool& unix_socket, bool& resolving);
// The resolved address of such a connection: connects `stream`; "" or why not.
[[nodiscard]] std::string connect_side_tcp(Stream& stream, const sockaddr* address);

}  // namespace pgtether
