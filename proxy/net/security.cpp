#include "proxy/net/security.hpp"

#include "proxy/net/log.hpp"

namespace pgtether {

std::shared_ptr<const SecuritySetup> load_security(const Config& config) {
    auto setup = std::make_shared<SecuritySetup>();
    if (config.client_tls_sslmode != SslMode::Disable) {
        setup->client_tls =
            std::make_shared<const TlsContext>(config, TlsContext::Side::AcceptClients);
    }
    if (config.server_tls_sslmode != SslMode::Disable) {
        setup->server_tls =
            std::make_shared<const TlsContext>(config, TlsContext::Side::ConnectToServers);
    }
    auto require_auth = parse_require_auth(config.server_require_auth);
    if (!require_auth) {
        throw ConfigError(config.config_file, 0, "server_require_auth", require_auth.error);
    }
    setup->server_require_auth = std::move(*require_auth.value);
    const bool verified_client_certs = config.client_tls_sslmode == SslMode::VerifyCa ||
                                       config.client_tls_sslmode == SslMode::VerifyFull;
    if (config.auth_type == AuthType::Cert) {
        // PgBouncer insists on the same: the certificate is the only credential, so it must be
        // required and checked against a CA the operator chose.
        if (!verified_client_certs) {
            throw ConfigError(config.config_file, 0, "auth_type",
                              "auth_type = cert needs client_tls_sslmode = verify-ca or "
                              "verify-full");
        }
        if (config.client_tls_ca_file.empty()) {
            throw ConfigError(config.config_file, 0, "auth_type",
                              "auth_type = cert needs client_tls_ca_file");
        }
    }
    if (config.auth_type == AuthType::Hba) {
        if (config.auth_hba_file.empty()) {
            throw ConfigError(config.config_file, 0, "auth_hba_file",
                              "auth_type = hba needs auth_hba_file");
        }
        if (!config.auth_ident_file.empty()) {
            setup->ident_maps =
                std::make_shared<const IdentMaps>(load_ident_file(config.auth_ident_file));
        }
        auto rules = std::make_shared<HbaRules>(
            load_hba_file(config.auth_hba_file, setup->ident_maps.get()));
        for (const auto& warning : rules->warnings) spdlog::warn("{}", warning);
        for (const auto& rule : rules->rules) {
            if (rule.method == HbaMethod::Cert &&
                (!setup->client_tls || config.client_tls_ca_file.empty())) {
                throw ConfigError(rule.file, rule.line, "",
                                  "cert authentication needs client TLS with client_tls_ca_file "
                                  "(client certificates are otherwise not checked)");
            }
        }
        setup->hba = std::move(rules);
    }
    return setup;
}

bool server_tls_settings_differ(const Config& a, const Config& b) {
    return a.server_tls_sslmode != b.server_tls_sslmode ||
           a.server_tls_key_file != b.server_tls_key_file ||
           a.server_tls_cert_file != b.server_tls_cert_file ||
           a.server_tls_ca_file != b.server_tls_ca_file ||
           a.server_tls_protocols != b.server_tls_protocols ||
           a.server_tls_ciphers != b.server_tls_ciphers ||
           a.server_tls13_ciphers != b.server_tls13_ciphers;
}

}  // namespace pgtether
