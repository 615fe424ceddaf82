// One PAM check of a user name and password (auth_type = pam; docs/tls-and-auth.md, "PAM"), as
// PgBouncer makes it: pam_start with the service name (auth_pam_service, PgBouncer's
// "pgbouncer"), PAM_RHOST set to the client's address, pam_authenticate, then pam_acct_mgmt
// (an expired or locked account fails too). The password answers the stack's hidden prompts.
//
// It blocks (a PAM stack may read files or ask a network service): it runs on libuv's thread
// pool (proxy/client/login_work.hpp), never on the event loop, and touches nothing but its
// request.
#pragma once

#include <string>

#include "proxy/client/password_verdict.hpp"

namespace pgtether {

struct PamRequest {
    std::string service;
    std::string user;
    std::string password;
    std::string remote_host;  // PAM_RHOST: the client's address, "" for the Unix socket
};

PasswordVerdict run_pam_check(const PamRequest& request);

}  // namespace pgtether
