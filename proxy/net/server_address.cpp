#include "proxy/net/server_address.hpp"

#include <netdb.h>
#include <netinet/in.h>

#include <cstring>

namespace pgtether {

std::string host_for_turn(const DatabaseConfig& db, std::uint64_t turn) {
    if (db.host.find(',') == std::string::npos) return db.host;
    auto hosts = split_host_list(db.host);
    return hosts[turn % hosts.size()];
}

int port_for_host(const DatabaseConfig& db, std::uint64_t index) {
    if (db.ports.empty()) return db.port;
    return db.ports[index % db.ports.size()];
}

std::string server_unix_socket_path(const std::string& host, int port, const Config& config) {
    if (!host.empty() && host[0] != '/') return {};
    std::string dir = host.empty() ? config.unix_socket_dir : host;
    if (dir.empty()) dir = "/tmp";
    return dir + "/.s.PGSQL." + std::to_string(port);
}

bool parse_ip_literal(const std::string& host, int port, sockaddr_storage& out) {
    std::memset(&out, 0, sizeof out);
    return uv_ip4_addr(host.c_str(), port, reinterpret_cast<sockaddr_in*>(&out)) == 0 ||
           uv_ip6_addr(host.c_str(), port, reinterpret_cast<sockaddr_in6*>(&out)) == 0;
}

namespace {

void on_getaddrinfo(uv_getaddrinfo_t* req, int status, addrinfo* res) {
    auto* owner = static_cast<ResolveClient*>(req->data);
    delete req;
    if (status != 0 || res == nullptr) {
        uv_freeaddrinfo(res);
        owner->on_resolved(status != 0 ? status : UV_EAI_NONAME, nullptr);
        return;
    }
    owner->on_resolved(0, res->ai_addr);
    uv_freeaddrinfo(res);
}

}  // namespace

int start_resolve(uv_loop_t* loop, ResolveClient& owner, const std::string& host, int port) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    auto* req = new uv_getaddrinfo_t;
    req->data = &owner;
    int rc = uv_getaddrinfo(loop, req, on_getaddrinfo, host.c_str(), std::to_string(port).c_str(),
                            &hints);
    if (rc != 0) delete req;
    return rc;
}

std::string start_side_connect(Stream& stream, uv_loop_t* loop, const std::string& host, int port,
                               const Config& config, ResolveClient& owner, bool& unix_socket,
                               bool& resolving) {
    resolving = false;
    std::string unix_path = server_unix_socket_path(host, port, config);
    if (!unix_path.empty()) {
        unix_socket = true;
        if (stream.init_pipe() != 0 || stream.connect_pipe(unix_path) != 0) {
            return "cannot create a socket";
        }
        return {};
    }
    if (stream.init_tcp() != 0) return "cannot create a socket";
    sockaddr_storage literal;
    if (parse_ip_literal(host, port, literal)) {
        return connect_side_tcp(stream, reinterpret_cast<const sockaddr*>(&literal));
    }
    if (int rc = start_resolve(loop, owner, host, port); rc != 0) {
        return "cannot resolve " + host + ": " + uv_strerror(rc);
    }
    resolving = true;
    return {};
}

std::string connect_side_tcp(Stream& stream, const sockaddr* address) {
    int rc = stream.connect_tcp(address);
    return rc != 0 ? std::string("cannot connect: ") + uv_strerror(rc) : std::string();
}

}  // namespace pgtether
