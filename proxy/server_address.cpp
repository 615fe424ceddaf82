#include "proxy/server_address.hpp"

#include <netdb.h>
#include <netinet/in.h>

#include <cstring>

namespace pgtether {

std::string host_for_turn(const DatabaseConfig& db, std::uint64_t turn) {
    if (db.host.find(',') == std::string::npos) return db.host;
    auto hosts = split_host_list(db.host);
    return hosts[turn % hosts.size()];
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

int start_resolving(uv_loop_t* loop, uv_getaddrinfo_t* req, uv_getaddrinfo_cb done,
                    const std::string& host, int port) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    return uv_getaddrinfo(loop, req, done, host.c_str(), std::to_string(port).c_str(), &hints);
}

}  // namespace pgtether
