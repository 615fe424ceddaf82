// systemd's notify protocol (sd_notify(3)), spoken directly: one datagram per state change to the
// Unix socket named in $NOTIFY_SOCKET (a path, or "@name" in the abstract namespace). Debian's
// pgbouncer.service is Type=notify; so is conf/pgtether.service. Without $NOTIFY_SOCKET every
// call does nothing.
//
//   READY=1       the listeners are open (after start-up and after each reload)
//   RELOADING=1   a reload (SIGHUP, RELOAD, SET) starts
//   STOPPING=1    shutdown begins
//   STATUS=...    a one-line summary shown by `systemctl status`
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace pgtether {

// The STATUS= line: "N clients, N servers, N pools" (pure, for tests).
std::string notify_status_line(std::size_t clients, std::size_t servers, std::size_t pools);

class SystemdNotifier {
  public:
    // Reads $NOTIFY_SOCKET now (a daemon keeps its environment, so -d changes nothing).
    SystemdNotifier();
    ~SystemdNotifier();
    SystemdNotifier(const SystemdNotifier&) = delete;
    SystemdNotifier& operator=(const SystemdNotifier&) = delete;

    [[nodiscard]] bool enabled() const { return !address_.empty(); }
    // Sends `state` ("READY=1\nSTATUS=..."); false when disabled or the send failed.
    bool notify(std::string_view state);

  private:
    std::string address_;  // as in $NOTIFY_SOCKET
    int fd_ = -1;
};

}  // namespace pgtether
