// What the TLS and HBA settings turn into when the configuration is (re)loaded: SSL contexts and
// parsed HBA rules, immutable and shared like the Config itself, so a reload swaps them whole and
// a connection that started with the old ones keeps them.
#pragma once

#include <memory>

#include "core/config.hpp"
#include "core/hba.hpp"
#include "core/ident_map.hpp"
#include "core/require_auth.hpp"
#include "proxy/net/tls.hpp"

namespace pgtether {

struct SecuritySetup {
    std::shared_ptr<const TlsContext> client_tls;  // nullptr: client_tls_sslmode = disable
    std::shared_ptr<const TlsContext> server_tls;  // nullptr: server_tls_sslmode = disable
    std::shared_ptr<const HbaRules> hba;           // set when auth_type = hba
    // auth_ident_file, read (as in PgBouncer) only with auth_type = hba; the maps hba's map=
    // options name. nullptr when not set.
    std::shared_ptr<const IdentMaps> ident_maps;
    RequireAuth server_require_auth;               // what servers may ask for at login
};

// Builds the setup from `config`, reading key, certificate, CA, HBA and ident map files. Throws ConfigError
// for unreadable files and for combinations that cannot work (auth_type = cert without verified
// client certificates, an HBA cert rule without client_tls_ca_file, ...).
std::shared_ptr<const SecuritySetup> load_security(const Config& config);

// Whether two configurations differ in a server_tls_* setting (existing server connections are
// then replaced on reload).
bool server_tls_settings_differ(const Config& a, const Config& b);

}  // namespace pgtether
