#include "proxy/client/ldap_check.hpp"

#include <ldap.h>
#include <sys/time.h>

namespace pgtether {

namespace {

constexpr int kConnectSeconds = 3;     // PgBouncer's LDAP_OPT_NETWORK_TIMEOUT
constexpr int kOperationSeconds = 10;  // each bind or search: a stalled server frees the thread

// An LDAP handle that unbinds when it goes.
class Connection {
  public:
    explicit Connection(LDAP* ldap) : ldap_(ldap) {}
    ~Connection() {
        if (ldap_ != nullptr) ldap_unbind_ext_s(ldap_, nullptr, nullptr);
    }
    Connection(const Connection&) = delete;
    Connection& operator=(const Connection&) = delete;
    [[nodiscard]] LDAP* get() const { return ldap_; }

  private:
    LDAP* ldap_;
};

std::string say(const char* what, int rc) { return std::string(what) + ": " + ldap_err2string(rc); }

// Opens a connection to the configured servers (StartTLS when asked); nullptr and `why` on failure.
LDAP* open_connection(const LdapOptions& options, std::string& why) {
    LDAP* ldap = nullptr;
    int rc = ldap_initialize(&ldap, options.uris().c_str());
    if (rc != LDAP_SUCCESS) {
        why = say("could not initialize LDAP", rc);
        return nullptr;
    }
    const int version = LDAP_VERSION3;
    timeval connect{kConnectSeconds, 0};
    timeval operation{kOperationSeconds, 0};
    if ((rc = ldap_set_option(ldap, LDAP_OPT_PROTOCOL_VERSION, &version)) != LDAP_SUCCESS ||
        (rc = ldap_set_option(ldap, LDAP_OPT_NETWORK_TIMEOUT, &connect)) != LDAP_SUCCESS ||
        (rc = ldap_set_option(ldap, LDAP_OPT_TIMEOUT, &operation)) != LDAP_SUCCESS) {
        why = say("could not set LDAP options", rc);
        ldap_unbind_ext_s(ldap, nullptr, nullptr);
        return nullptr;
    }
    if (options.start_tls && (rc = ldap_start_tls_s(ldap, nullptr, nullptr)) != LDAP_SUCCESS) {
        why = say("could not start LDAP TLS session", rc);
        ldap_unbind_ext_s(ldap, nullptr, nullptr);
        return nullptr;
    }
    return ldap;
}

int simple_bind(LDAP* ldap, const std::string& dn, const std::string& password) {
    berval credentials{static_cast<ber_len_t>(password.size()),
                       const_cast<char*>(password.data())};
    return ldap_sasl_bind_s(ldap, dn.c_str(), LDAP_SASL_SIMPLE, &credentials, nullptr, nullptr,
                            nullptr);
}

int scope_of(LdapScope scope) {
    switch (scope) {
        case LdapScope::Base: return LDAP_SCOPE_BASE;
        case LdapScope::OneLevel: return LDAP_SCOPE_ONELEVEL;
        case LdapScope::Subtree: break;
    }
    return LDAP_SCOPE_SUBTREE;
}

// Search+bind's first half: the DN of the user's one entry, or `why` not.
std::optional<std::string> find_user_dn(const LdapRequest& request, std::string& why) {
    const LdapOptions& options = request.options;
    auto filter = ldap_search_filter(options, request.user);
    if (!filter) {
        why = "invalid character in user name for LDAP authentication";
        return std::nullopt;
    }
    std::string connect_why;
    LDAP* raw = open_connection(options, connect_why);
    if (raw == nullptr) {
        why = connect_why;
        return std::nullopt;
    }
    Connection ldap(raw);
    // Bound as ldapbinddn to search, or anonymously when none is given.
    int rc = simple_bind(ldap.get(), options.bind_dn, options.bind_password);
    if (rc != LDAP_SUCCESS) {
        why = say(("could not perform initial LDAP bind for ldapbinddn \"" + options.bind_dn +
                   "\"").c_str(),
                  rc);
        return std::nullopt;
    }
    // One attribute only (none with a custom filter), else every attribute comes back.
    std::string attribute = options.search_attribute.empty() ? "uid" : options.search_attribute;
    char no_attributes[] = LDAP_NO_ATTRS;
    char* attributes[2] = {options.search_filter.empty() ? attribute.data() : no_attributes,
                           nullptr};
    LDAPMessage* found = nullptr;
    timeval operation{kOperationSeconds, 0};
    rc = ldap_search_ext_s(ldap.get(), options.base_dn.c_str(), scope_of(options.scope),
                           filter->c_str(), attributes, 0, nullptr, nullptr, &operation, 2, &found);
    if (rc != LDAP_SUCCESS && rc != LDAP_SIZELIMIT_EXCEEDED) {
        if (found != nullptr) ldap_msgfree(found);
        why = say(("could not search LDAP for filter \"" + *filter + "\"").c_str(), rc);
        return std::nullopt;
    }
    const int count = ldap_count_entries(ldap.get(), found);
    if (count != 1 || rc == LDAP_SIZELIMIT_EXCEEDED) {
        ldap_msgfree(found);
        why = count == 0 ? "LDAP user \"" + request.user + "\" does not exist"
                         : "LDAP user \"" + request.user + "\" is not unique";
        return std::nullopt;
    }
    char* dn = ldap_get_dn(ldap.get(), ldap_first_entry(ldap.get(), found));
    ldap_msgfree(found);
    if (dn == nullptr) {
        why = "could not get the dn of the entry matching \"" + *filter + "\"";
        return std::nullopt;
    }
    std::string out(dn);
    ldap_memfree(dn);
    return out;
}

}  // namespace

PasswordVerdict run_ldap_check(const LdapRequest& request) {
    PasswordVerdict verdict;
    // An empty password would be an unauthenticated bind, which LDAP servers accept.
    if (request.password.empty()) {
        verdict.failure = "empty password";
        return verdict;
    }
    std::string dn;
    if (request.options.search_bind()) {
        auto found = find_user_dn(request, verdict.failure);
        if (!found) return verdict;
        dn = std::move(*found);
    } else {
        dn = ldap_simple_bind_dn(request.options, request.user);
    }
    // A connection of its own for the user's bind, as PostgreSQL does after a search.
    LDAP* raw = open_connection(request.options, verdict.failure);
    if (raw == nullptr) return verdict;
    Connection ldap(raw);
    const int rc = simple_bind(ldap.get(), dn, request.password);
    if (rc != LDAP_SUCCESS) {
        verdict.failure = "LDAP login failed for user \"" + dn + "\" on server \"" +
                          request.options.uris() + "\": " + ldap_err2string(rc);
        return verdict;
    }
    verdict.ok = true;
    return verdict;
}

}  // namespace pgtether
