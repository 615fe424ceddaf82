#include "proxy/daemon/systemd_notify.hpp"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstddef>
#include <cstdlib>
#include <cstring>

namespace pgtether {

std::string notify_status_line(std::size_t clients, std::size_t servers, std::size_t pools) {
    return std::to_string(clients) + " clients, " + std::to_string(servers) + " servers, " +
           std::to_string(pools) + " pools";
}

SystemdNotifier::SystemdNotifier() {
    const char* socket_name = std::getenv("NOTIFY_SOCKET");
    if (!socket_name || (socket_name[0] != '/' && socket_name[0] != '@') ||
        std::strlen(socket_name) >= sizeof(sockaddr_un::sun_path)) {
        return;
    }
    fd_ = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd_ >= 0) address_ = socket_name;
}

SystemdNotifier::~SystemdNotifier() {
    if (fd_ >= 0) ::close(fd_);
}

bool SystemdNotifier::notify(std::string_view state) {
    if (!enabled()) return false;
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    std::memcpy(address.sun_path, address_.data(), address_.size());
    // "@name": the abstract namespace, whose names start with a NUL byte and are not terminated.
    if (address_[0] == '@') address.sun_path[0] = '\0';
    auto length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + address_.size() +
                                         (address_[0] == '@' ? 0 : 1));
    ssize_t sent = ::sendto(fd_, state.data(), state.size(), MSG_NOSIGNAL,
                            reinterpret_cast<const sockaddr*>(&address), length);
    return sent == static_cast<ssize_t>(state.size());
}

}  // namespace pgtether
