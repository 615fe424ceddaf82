#include "proxy/client/pam_check.hpp"

#include <security/pam_appl.h>

#include <cstdlib>
#include <cstring>

namespace pgtether {

namespace {

// PAM's conversation: the password answers every prompt that hides what is typed (PgBouncer and
// PostgreSQL answer only those); other messages get an empty answer. The answers are malloc'd:
// PAM frees them.
int converse(int count, const struct pam_message** messages, struct pam_response** answers,
             void* data) {
    if (count < 1 || messages == nullptr || data == nullptr) return PAM_CONV_ERR;
    const auto* password = static_cast<const std::string*>(data);
    auto* out = static_cast<pam_response*>(std::calloc(static_cast<std::size_t>(count),
                                                       sizeof(pam_response)));
    if (out == nullptr) return PAM_BUF_ERR;
    for (int i = 0; i < count; ++i) {
        if (messages[i]->msg_style != PAM_PROMPT_ECHO_OFF) continue;
        out[i].resp = strdup(password->c_str());
        if (out[i].resp == nullptr) {
            for (int j = 0; j < i; ++j) std::free(out[j].resp);
            std::free(out);
            return PAM_BUF_ERR;
        }
    }
    *answers = out;
    return PAM_SUCCESS;
}

}  // namespace

PasswordVerdict run_pam_check(const PamRequest& request) {
    PasswordVerdict verdict;
    // PAM keeps a pointer to the conversation and its data for the handle's life.
    std::string password = request.password;
    const pam_conv conversation{&converse, &password};
    pam_handle_t* handle = nullptr;
    int rc = pam_start(request.service.c_str(), request.user.c_str(), &conversation, &handle);
    if (rc != PAM_SUCCESS) {
        verdict.failure = std::string("pam_start() failed: ") + pam_strerror(handle, rc);
        if (handle != nullptr) pam_end(handle, rc);
        return verdict;
    }
    auto failed = [&](const char* call) {
        verdict.failure = std::string(call) + " failed: " + pam_strerror(handle, rc);
        pam_end(handle, rc);
        return verdict;
    };
    if (!request.remote_host.empty()) {
        rc = pam_set_item(handle, PAM_RHOST, request.remote_host.c_str());
        if (rc != PAM_SUCCESS) return failed("pam_set_item(PAM_RHOST)");
    }
    rc = pam_authenticate(handle, PAM_SILENT);
    if (rc != PAM_SUCCESS) return failed("pam_authenticate()");
    rc = pam_acct_mgmt(handle, PAM_SILENT);
    if (rc != PAM_SUCCESS) return failed("pam_acct_mgmt()");
    pam_end(handle, rc);
    verdict.ok = true;
    return verdict;
}

}  // namespace pgtether
