// TLS contexts and sessions without sockets: two TlsSessions talk through memory, so the handshake,
// certificate checks, ALPN and data transfer of proxy/net/tls.cpp are tested on their own. Keys and
// certificates are made here with OpenSSL (a CA, a server certificate for "db.example.test", client
// certificates from that CA and from a stranger CA).
#include <doctest/doctest.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <cstdio>
#include <filesystem>
#include <random>
#include <string>
#include <utility>

#include "core/config.hpp"
#include "proxy/net/tls.hpp"

using namespace pgtether;

namespace {

namespace fs = std::filesystem;

struct KeyPair {
    EVP_PKEY* key = nullptr;
    X509* cert = nullptr;
};

// A certificate for `cn` signed by `issuer` (self-signed when issuer is null), with optional DNS
// subjectAltName and CA flag.
KeyPair make_cert(const std::string& cn, const KeyPair* issuer, const std::string& dns_san,
                  bool ca) {
    KeyPair out;
    out.key = EVP_EC_gen("P-256");
    REQUIRE(out.key != nullptr);
    out.cert = X509_new();
    X509_set_version(out.cert, 2);
    static long serial = 1;
    ASN1_INTEGER_set(X509_get_serialNumber(out.cert), serial++);
    X509_gmtime_adj(X509_getm_notBefore(out.cert), -60);
    X509_gmtime_adj(X509_getm_notAfter(out.cert), 3600);
    X509_set_pubkey(out.cert, out.key);
    X509_NAME* name = X509_get_subject_name(out.cert);
    X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8,
                               reinterpret_cast<const unsigned char*>(cn.data()),
                               static_cast<int>(cn.size()), -1, 0);
    X509_set_issuer_name(out.cert, issuer ? X509_get_subject_name(issuer->cert) : name);
    X509V3_CTX ctx;
    X509V3_set_ctx_nodb(&ctx);
    X509V3_set_ctx(&ctx, issuer ? issuer->cert : out.cert, out.cert, nullptr, nullptr, 0);
    auto add = [&](int nid, const std::string& value) {
        X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str());
        REQUIRE(ext != nullptr);
        X509_add_ext(out.cert, ext, -1);
        X509_EXTENSION_free(ext);
    };
    add(NID_basic_constraints, ca ? "critical,CA:TRUE" : "CA:FALSE");
    if (ca) add(NID_key_usage, "critical,keyCertSign,cRLSign");
    if (!dns_san.empty()) add(NID_subject_alt_name, "DNS:" + dns_san);
    REQUIRE(X509_sign(out.cert, issuer ? issuer->key : out.key, EVP_sha256()) > 0);
    return out;
}

void write_pem(const fs::path& path, const KeyPair& pair, bool key) {
    std::FILE* f = std::fopen(path.c_str(), "w");
    REQUIRE(f != nullptr);
    if (key) {
        PEM_write_PrivateKey(f, pair.key, nullptr, nullptr, 0, nullptr, nullptr);
    } else {
        PEM_write_X509(f, pair.cert);
    }
    std::fclose(f);
}

// Files for every test, made once.
struct Pki {
    fs::path dir;
    Pki() {
        std::random_device rd;
        dir = fs::temp_directory_path() / ("pgt-tls-unit-" + std::to_string(rd()));
        fs::create_directories(dir);
        KeyPair ca = make_cert("pgtether unit CA", nullptr, "", true);
        KeyPair stranger = make_cert("stranger CA", nullptr, "", true);
        KeyPair server = make_cert("db.example.test", &ca, "db.example.test", false);
        KeyPair alice = make_cert("alice", &ca, "", false);
        KeyPair mallory = make_cert("alice", &stranger, "", false);
        write_pem(dir / "ca.crt", ca, false);
        write_pem(dir / "server.crt", server, false);
        write_pem(dir / "server.key", server, true);
        write_pem(dir / "alice.crt", alice, false);
        write_pem(dir / "alice.key", alice, true);
        write_pem(dir / "mallory.crt", mallory, false);
        write_pem(dir / "mallory.key", mallory, true);
        write_pem(dir / "stranger.key", stranger, true);
        for (auto* p : {&ca, &stranger, &server, &alice, &mallory}) {
            EVP_PKEY_free(p->key);
            X509_free(p->cert);
        }
    }
    ~Pki() {
        std::error_code ec;
        fs::remove_all(dir, ec);
    }
    std::string path(const char* name) const { return (dir / name).string(); }
};

const Pki& pki() {
    static Pki instance;
    return instance;
}

Config accept_config(SslMode mode, bool with_ca) {
    Config c;
    c.config_file = "test.ini";
    c.client_tls_sslmode = mode;
    c.client_tls_key_file = pki().path("server.key");
    c.client_tls_cert_file = pki().path("server.crt");
    if (with_ca) c.client_tls_ca_file = pki().path("ca.crt");
    return c;
}

Config connect_config(SslMode mode, const char* client_cert = nullptr) {
    Config c;
    c.config_file = "test.ini";
    c.server_tls_sslmode = mode;
    c.server_tls_ca_file = pki().path("ca.crt");
    if (client_cert) {
        c.server_tls_cert_file = pki().path((std::string(client_cert) + ".crt").c_str());
        c.server_tls_key_file = pki().path((std::string(client_cert) + ".key").c_str());
    }
    return c;
}

// Shuttles ciphertext between the two sessions until both finish the handshake or one fails.
struct Pair {
    TlsContext server_ctx;
    TlsContext client_ctx;
    TlsSession server;
    TlsSession client;
    std::string to_server;
    std::string to_client;

    Pair(const Config& accept, const Config& connect, const std::string& host)
        : server_ctx(accept, TlsContext::Side::AcceptClients),
          client_ctx(connect, TlsContext::Side::ConnectToServers),
          server(server_ctx, ""),
          client(client_ctx, host) {}

    // Returns {client status, server status} once neither makes progress.
    std::pair<TlsSession::Status, TlsSession::Status> handshake() {
        auto cs = TlsSession::Status::WantInput;
        auto ss = TlsSession::Status::WantInput;
        for (int round = 0; round < 10; ++round) {
            step(client, to_client, to_server, cs);
            step(server, to_server, to_client, ss);
            if (cs == TlsSession::Status::Failed || ss == TlsSession::Status::Failed) break;
            if (cs == TlsSession::Status::Ok && ss == TlsSession::Status::Ok && to_server.empty() &&
                to_client.empty()) {
                break;
            }
        }
        return {cs, ss};
    }

    static void step(TlsSession& s, std::string& in, std::string& out, TlsSession::Status& st) {
        if (st == TlsSession::Status::Failed) return;
        std::string input;
        std::swap(input, in);
        s.set_input(protocol::as_bytes(input));
        s.set_output(&out);
        if (!s.established()) {
            st = s.handshake();
        } else {
            // Post-handshake messages (TLS 1.3 tickets are off, but key updates could come).
            std::uint8_t buf[64];
            auto r = s.read(buf);
            st = r.first == TlsSession::Status::WantInput ? TlsSession::Status::Ok : r.first;
        }
        // Whatever OpenSSL does not fail on, it consumes whole.
        if (st != TlsSession::Status::Failed) CHECK(s.input_left() == 0);
        s.set_input({});
        s.set_output(nullptr);
    }

    // Sends `data` from `from` to `to`; returns what `to` decrypted.
    static std::string transfer(TlsSession& from, TlsSession& to, const std::string& data) {
        std::string wire;
        from.set_output(&wire);
        REQUIRE(from.write(protocol::as_bytes(data)));
        from.set_output(nullptr);
        std::string received;
        std::string ignored;
        to.set_output(&ignored);
        // Feed the ciphertext in uneven pieces, as a socket would.
        std::size_t pos = 0;
        std::size_t piece = 1;
        while (pos < wire.size()) {
            std::size_t n = std::min(piece, wire.size() - pos);
            to.set_input(protocol::as_bytes(std::string_view(wire).substr(pos, n)));
            pos += n;
            piece = piece * 3 + 7;
            std::uint8_t buf[5000];
            for (;;) {
                auto [status, got] = to.read(buf);
                received.append(reinterpret_cast<const char*>(buf), got);
                if (status != TlsSession::Status::Ok) {
                    REQUIRE(status == TlsSession::Status::WantInput);
                    break;
                }
            }
            CHECK(to.input_left() == 0);
        }
        to.set_input({});
        to.set_output(nullptr);
        return received;
    }
};

bool contains(const std::string& s, const std::string& part) {
    return s.find(part) != std::string::npos;
}

std::string context_error(const Config& config, TlsContext::Side side) {
    try {
        TlsContext ctx(config, side);
    } catch (const ConfigError& e) {
        return e.what();
    }
    return "";
}

}  // namespace

TEST_CASE("tls: handshake, ALPN and data through memory") {
    Pair p(accept_config(SslMode::Require, false), connect_config(SslMode::VerifyFull),
           "db.example.test");
    auto [cs, ss] = p.handshake();
    REQUIRE(cs == TlsSession::Status::Ok);
    REQUIRE(ss == TlsSession::Status::Ok);
    CHECK(p.client.established());
    CHECK(p.server.established());
    CHECK(std::string(p.client.protocol_version()) == "TLSv1.3");  // "secure" allows 1.2 and 1.3
    CHECK(p.server.alpn() == "postgresql");
    CHECK(p.client.alpn() == "postgresql");
    CHECK(p.client.peer_certificate_verified());
    CHECK(p.client.peer_common_name() == "db.example.test");
    // require without client_tls_ca_file asks for no client certificate.
    CHECK_FALSE(p.server.peer_certificate_verified());
    CHECK_FALSE(p.server.peer_common_name());

    std::string small = "Q\0\0\0\rSELECT 1;\0";
    CHECK(Pair::transfer(p.client, p.server, small) == small);
    std::string big(300 * 1000, 'x');
    for (std::size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>('a' + i % 26);
    CHECK(Pair::transfer(p.server, p.client, big) == big);

    // close_notify ends the peer's stream.
    std::string wire;
    p.client.set_output(&wire);
    p.client.shutdown();
    p.client.set_output(nullptr);
    REQUIRE_FALSE(wire.empty());
    std::string ignored;
    p.server.set_output(&ignored);
    p.server.set_input(protocol::as_bytes(wire));
    std::uint8_t buf[16];
    CHECK(p.server.read(buf).first == TlsSession::Status::Closed);
}

TEST_CASE("tls: verify-full checks the host name, verify-ca only the chain") {
    SUBCASE("wrong host name") {
        Pair p(accept_config(SslMode::Require, false), connect_config(SslMode::VerifyFull),
               "other.example.test");
        auto [cs, ss] = p.handshake();
        CHECK(cs == TlsSession::Status::Failed);
        CHECK(contains(p.client.error(), "certificate verify failed"));
        CHECK(contains(p.client.error(), "hostname mismatch"));
    }
    SUBCASE("an IP address the certificate does not name") {
        Pair p(accept_config(SslMode::Require, false), connect_config(SslMode::VerifyFull),
               "127.0.0.1");
        CHECK(p.handshake().first == TlsSession::Status::Failed);
        CHECK(contains(p.client.error(), "IP address mismatch"));
    }
    SUBCASE("verify-ca accepts any name") {
        Pair p(accept_config(SslMode::Require, false), connect_config(SslMode::VerifyCa),
               "other.example.test");
        CHECK(p.handshake() == std::pair(TlsSession::Status::Ok, TlsSession::Status::Ok));
    }
    SUBCASE("verify-ca refuses a certificate from another CA") {
        Config connect = connect_config(SslMode::VerifyCa);
        // Trust a CA that did not sign the server certificate.
        connect.server_tls_ca_file = pki().path("mallory.crt");
        Pair p(accept_config(SslMode::Require, false), connect, "db.example.test");
        CHECK(p.handshake().first == TlsSession::Status::Failed);
        CHECK(contains(p.client.error(), "certificate verify failed"));
    }
    SUBCASE("require does not check at all") {
        Config connect = connect_config(SslMode::Require);
        connect.server_tls_ca_file = pki().path("mallory.crt");
        Pair p(accept_config(SslMode::Require, false), connect, "nothing.test");
        CHECK(p.handshake() == std::pair(TlsSession::Status::Ok, TlsSession::Status::Ok));
    }
}

TEST_CASE("tls: client certificates") {
    SUBCASE("verify-ca requires one") {
        Pair p(accept_config(SslMode::VerifyCa, true), connect_config(SslMode::Require),
               "db.example.test");
        auto [cs, ss] = p.handshake();
        CHECK(ss == TlsSession::Status::Failed);
        CHECK(contains(p.server.error(), "certificate"));
    }
    SUBCASE("verify-full accepts one from the CA and names its CN") {
        Pair p(accept_config(SslMode::VerifyFull, true), connect_config(SslMode::Require, "alice"),
               "db.example.test");
        CHECK(p.handshake() == std::pair(TlsSession::Status::Ok, TlsSession::Status::Ok));
        CHECK(p.server.peer_certificate_verified());
        CHECK(p.server.peer_common_name() == "alice");
    }
    SUBCASE("verify-ca refuses one from another CA") {
        Pair p(accept_config(SslMode::VerifyCa, true), connect_config(SslMode::Require, "mallory"),
               "db.example.test");
        auto [cs, ss] = p.handshake();
        CHECK(ss == TlsSession::Status::Failed);
    }
    SUBCASE("require with a CA file: optional, recorded, never fatal") {
        Pair good(accept_config(SslMode::Require, true), connect_config(SslMode::Require, "alice"),
                  "db.example.test");
        CHECK(good.handshake() == std::pair(TlsSession::Status::Ok, TlsSession::Status::Ok));
        CHECK(good.server.peer_certificate_verified());
        Pair bad(accept_config(SslMode::Require, true),
                 connect_config(SslMode::Require, "mallory"), "db.example.test");
        CHECK(bad.handshake() == std::pair(TlsSession::Status::Ok, TlsSession::Status::Ok));
        CHECK_FALSE(bad.server.peer_certificate_verified());
        CHECK(bad.server.peer_common_name() == "alice");  // a name, but not a verified one
        Pair none(accept_config(SslMode::Require, true), connect_config(SslMode::Require),
                  "db.example.test");
        CHECK(none.handshake() == std::pair(TlsSession::Status::Ok, TlsSession::Status::Ok));
        CHECK_FALSE(none.server.peer_certificate_verified());
    }
}

TEST_CASE("tls: protocols and ciphers settings") {
    std::string error;
    auto secure = parse_tls_protocols("secure", error);
    REQUIRE(secure);
    CHECK(secure->min_version == TLS1_2_VERSION);
    CHECK(secure->max_version == TLS1_3_VERSION);
    CHECK(secure->disable_options == 0);
    auto all = parse_tls_protocols("all", error);
    REQUIRE(all);
    CHECK(all->min_version == TLS1_VERSION);
    CHECK(all->max_version == TLS1_3_VERSION);
    auto holes = parse_tls_protocols("tlsv1.0, TLSv1.3", error);
    REQUIRE(holes);
    CHECK(holes->min_version == TLS1_VERSION);
    CHECK(holes->max_version == TLS1_3_VERSION);
    CHECK(holes->disable_options == (SSL_OP_NO_TLSv1_1 | SSL_OP_NO_TLSv1_2));
    auto minus = parse_tls_protocols("!tlsv1.0:!tlsv1.1:!tlsv1.2", error);
    REQUIRE(minus);
    CHECK(minus->min_version == TLS1_3_VERSION);
    CHECK_FALSE(parse_tls_protocols("tlsv1.4", error));
    CHECK(contains(error, "unknown TLS protocol \"tlsv1.4\""));
    CHECK_FALSE(parse_tls_protocols("-all", error));
    CHECK(contains(error, "no TLS protocol version"));

    CHECK(resolve_tls_ciphers("fast") != "fast");
    CHECK(resolve_tls_ciphers("SECURE") == resolve_tls_ciphers("default"));
    CHECK(resolve_tls_ciphers("ECDHE-RSA-AES128-GCM-SHA256") == "ECDHE-RSA-AES128-GCM-SHA256");

    // TLS 1.3 only, enforced on both ends.
    Config accept = accept_config(SslMode::Require, false);
    accept.client_tls_protocols = "tlsv1.2";
    Config connect = connect_config(SslMode::Require);
    connect.server_tls_protocols = "tlsv1.3";
    Pair p(accept, connect, "db.example.test");
    auto [cs, ss] = p.handshake();
    CHECK((cs == TlsSession::Status::Failed || ss == TlsSession::Status::Failed));
    CHECK(contains(p.server.error() + p.client.error(), "protocol"));
}

TEST_CASE("tls: configuration errors name the setting") {
    Config missing = accept_config(SslMode::Require, false);
    missing.client_tls_key_file.clear();
    missing.client_tls_cert_file.clear();
    CHECK(contains(context_error(missing, TlsContext::Side::AcceptClients),
                   "client_tls_key_file: client_tls_sslmode = require needs client_tls_key_file"));

    Config half = connect_config(SslMode::Require);
    half.server_tls_cert_file = pki().path("alice.crt");
    CHECK(contains(context_error(half, TlsContext::Side::ConnectToServers),
                   "must be set together"));

    Config wrong_key = accept_config(SslMode::Require, false);
    wrong_key.client_tls_key_file = pki().path("alice.key");
    std::string key_error = context_error(wrong_key, TlsContext::Side::AcceptClients);
    CHECK(contains(key_error, "client_tls_key_file: "));
    CHECK(contains(key_error, "alice.key"));

    Config unreadable = accept_config(SslMode::Require, false);
    unreadable.client_tls_cert_file = "/nonexistent.crt";
    // The system's reason, not OpenSSL's "error 2147483650: system lib".
    CHECK(contains(context_error(unreadable, TlsContext::Side::AcceptClients),
                   "client_tls_cert_file: cannot read certificate \"/nonexistent.crt\": No such "
                   "file or directory"));

    Config ca = accept_config(SslMode::VerifyFull, false);
    CHECK(contains(context_error(ca, TlsContext::Side::AcceptClients),
                   "verify-full needs client_tls_ca_file"));

    Config ciphers = accept_config(SslMode::Require, false);
    ciphers.client_tls_ciphers = "NO-SUCH-CIPHER";
    CHECK(contains(context_error(ciphers, TlsContext::Side::AcceptClients),
                   "client_tls_ciphers: no usable cipher"));

    Config suites = connect_config(SslMode::Require);
    suites.server_tls13_ciphers = "TLS_NOPE";
    CHECK(contains(context_error(suites, TlsContext::Side::ConnectToServers),
                   "server_tls13_ciphers"));

    Config protocols = accept_config(SslMode::Require, false);
    protocols.client_tls_protocols = "ssl3";
    CHECK(contains(context_error(protocols, TlsContext::Side::AcceptClients),
                   "client_tls_protocols: invalid value \"ssl3\""));

    Config dh = accept_config(SslMode::Require, false);
    dh.client_tls_dheparams = "huge";
    CHECK(contains(context_error(dh, TlsContext::Side::AcceptClients), "client_tls_dheparams"));
    dh.client_tls_dheparams = "none";
    CHECK(context_error(dh, TlsContext::Side::AcceptClients).empty());

    Config curve = accept_config(SslMode::Require, false);
    curve.client_tls_ecdhcurve = "nocurve";
    CHECK(contains(context_error(curve, TlsContext::Side::AcceptClients), "unknown curve"));
    curve.client_tls_ecdhcurve = "secp384r1";
    CHECK(context_error(curve, TlsContext::Side::AcceptClients).empty());
}
