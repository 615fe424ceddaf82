// Running as root (user = / -u) and systemd's notify protocol: the decisions and texts, without
// switching users or sending datagrams (tests/integration/test_systemd.cpp does that).
#include <doctest/doctest.h>

#include "core/privilege_plan.hpp"
#include "proxy/daemon/systemd_notify.hpp"

using namespace pgtether;
using Action = PrivilegePlan::Action;

TEST_CASE("plan_privileges: root switches to the user, or refuses without one") {
    struct Case {
        bool root;
        const char* wanted;
        const char* current;
        Action action;
        const char* message_part;
    };
    const Case cases[] = {
        {true, "postgres", "root", Action::Switch, ""},
        {true, "", "root", Action::Refuse, "should not run as root"},
        {true, "root", "root", Action::Refuse, "should not run as root"},
        {false, "", "postgres", Action::Keep, ""},
        {false, "postgres", "postgres", Action::Keep, ""},
        {false, "pgbouncer", "postgres", Action::Refuse, "cannot switch to user \"pgbouncer\""},
    };
    for (const auto& c : cases) {
        CAPTURE(c.root);
        CAPTURE(c.wanted);
        auto plan = plan_privileges(c.root, c.wanted, c.current);
        CHECK(plan.action == c.action);
        CHECK(plan.message.find(c.message_part) != std::string::npos);
    }
}

TEST_CASE("systemd STATUS line, and no NOTIFY_SOCKET means no notifier") {
    CHECK(notify_status_line(3, 2, 1) == "3 clients, 2 servers, 1 pools");
    unsetenv("NOTIFY_SOCKET");
    SystemdNotifier off;
    CHECK_FALSE(off.enabled());
    CHECK_FALSE(off.notify("READY=1"));
    setenv("NOTIFY_SOCKET", "relative/path", 1);  // neither a path nor @abstract: ignored
    SystemdNotifier bad;
    CHECK_FALSE(bad.enabled());
    unsetenv("NOTIFY_SOCKET");
}
