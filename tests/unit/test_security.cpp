// load_security: the combinations of TLS and authentication settings that cannot work are refused
// when the configuration is loaded, naming the setting (the TLS contexts themselves are tested in
// test_tls.cpp, the HBA parser in test_hba.cpp).
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <string>

#include "core/config.hpp"
#include "proxy/net/security.hpp"

using namespace pgtether;

namespace {

std::string load_error(const Config& config) {
    try {
        load_security(config);
    } catch (const ConfigError& e) {
        return e.what();
    }
    return "";
}

bool contains(const std::string& s, const std::string& part) {
    return s.find(part) != std::string::npos;
}

}  // namespace

TEST_CASE("security: nothing configured, only the server side's TLS built") {
    // server_tls_sslmode defaults to prefer (PgBouncer 1.20+): TLS is asked of every server.
    Config config;
    auto setup = load_security(config);
    CHECK_FALSE(setup->client_tls);
    CHECK(setup->server_tls);
    CHECK_FALSE(setup->hba);
    config.server_tls_sslmode = SslMode::Disable;
    CHECK_FALSE(load_security(config)->server_tls);
}

TEST_CASE("security: auth_type = cert needs verified client certificates") {
    Config config;
    config.config_file = "p.ini";
    config.auth_type = AuthType::Cert;
    CHECK(contains(load_error(config),
                   "p.ini: auth_type: auth_type = cert needs client_tls_sslmode = verify-ca or "
                   "verify-full"));
}

TEST_CASE("security: auth_type = hba needs a readable, valid auth_hba_file") {
    Config config;
    config.config_file = "p.ini";
    config.auth_type = AuthType::Hba;
    CHECK(contains(load_error(config), "auth_hba_file: auth_type = hba needs auth_hba_file"));

    std::random_device rd;
    auto dir = std::filesystem::temp_directory_path() / ("pgt-sec-" + std::to_string(rd()));
    std::filesystem::create_directories(dir);
    auto hba = (dir / "hba.conf").string();
    config.auth_hba_file = hba;
    CHECK(contains(load_error(config), hba + ": cannot read HBA file"));

    std::ofstream(hba) << "host all all 127.0.0.1/32 md5\nlocal all all trust\n";
    auto setup = load_security(config);
    REQUIRE(setup->hba);
    CHECK(setup->hba->rules.size() == 2);

    // A cert line can never be satisfied without client TLS and a CA: refused, with its line.
    std::ofstream(hba) << "local all all trust\nhostssl all all 0.0.0.0/0 cert\n";
    CHECK(contains(load_error(config), hba + ":2: cert authentication needs client TLS"));

    std::ofstream(hba) << "host all all 127.0.0.1/32 md6\n";
    CHECK(contains(load_error(config), hba + ":1: authentication method \"md6\""));
    std::filesystem::remove_all(dir);
}

TEST_CASE("security: server TLS settings that retire server connections on reload") {
    Config a;
    Config b;
    CHECK_FALSE(server_tls_settings_differ(a, b));
    b.client_tls_sslmode = SslMode::Require;  // client side: no effect on servers
    CHECK_FALSE(server_tls_settings_differ(a, b));
    b.server_tls_ca_file = "/etc/ca.crt";
    CHECK(server_tls_settings_differ(a, b));
    b = a;
    b.server_tls_sslmode = SslMode::VerifyFull;
    CHECK(server_tls_settings_differ(a, b));
}
