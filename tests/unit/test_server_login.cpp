// ServerLogin (proxy/server/server_login.hpp) driven by byte-literal server messages: what pgtether
// answers, what it refuses under server_require_auth, and that a SCRAM exchange must end with a
// verified server signature before AuthenticationOk counts.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "protocol/backend_messages.hpp"
#include "protocol/frontend_messages.hpp"
#include "protocol/scram.hpp"
#include "core/require_auth.hpp"
#include "proxy/server/server_login.hpp"

using namespace pgtether;

namespace {

std::string be32(std::uint32_t v) {
    return {static_cast<char>(v >> 24), static_cast<char>(v >> 16), static_cast<char>(v >> 8),
            static_cast<char>(v)};
}

// An Authentication message body: Int32 code, then the request's data (protocol §55.7).
struct ServerSays {
    std::string body;
    ServerSays(std::uint32_t code, std::string data = {}) : body(be32(code) + std::move(data)) {}
};

const ServerSays kOk{0};
const ServerSays kCleartext{3};
const ServerSays kMd5{5, std::string("\x01\x02\x03\x04", 4)};
const ServerSays kSasl{10, std::string("SCRAM-SHA-256\0\0", 15)};

ServerLogin::Reply feed(ServerLogin& login, const ServerSays& message) {
    auto parsed = protocol::parse_authentication(protocol::as_bytes(message.body));
    REQUIRE(parsed.has_value());
    return login.on_authentication(*parsed);
}

ServerCredentials with_password(const std::string& require_auth = "") {
    ServerCredentials credentials;
    credentials.user = "alice";
    credentials.password = "pencil";
    auto policy = parse_require_auth(require_auth);
    REQUIRE(policy);
    credentials.require_auth = *policy.value;
    return credentials;
}

// The payload of the SASLInitialResponse / SASLResponse ('p') pgtether sent.
std::string sasl_payload(const std::string& sent, bool initial) {
    REQUIRE(sent.size() > 5);
    REQUIRE(sent[0] == 'p');
    auto body = protocol::as_bytes(std::string_view(sent).substr(5));
    if (!initial) return std::string(protocol::as_chars(body));
    auto parsed = protocol::parse_sasl_initial_response(body);
    REQUIRE(parsed.has_value());
    REQUIRE(parsed->data.has_value());
    return std::string(*parsed->data);
}

// A real SCRAM server for "pencil", up to its server-final-message.
struct ScramExchange {
    protocol::ScramServer server{protocol::make_scram_secret("pencil", "salt-salt-salt", 4096),
                                 "server-nonce-bytes"};
    std::string server_final;

    void run(ServerLogin& login) {
        auto first = feed(login, kSasl);
        REQUIRE(first.ok);
        auto server_first = server.client_first(sasl_payload(first.send, true));
        REQUIRE(server_first.status == protocol::ScramServer::Status::Continue);
        auto final_message = feed(login, ServerSays(11, server_first.message));
        REQUIRE(final_message.ok);
        auto done = server.client_final(sasl_payload(final_message.send, false));
        REQUIRE(done.status == protocol::ScramServer::Status::Done);
        server_final = done.message;
    }
};

}  // namespace

TEST_CASE("server_login: a complete SCRAM exchange, then AuthenticationOk") {
    ServerLogin login(with_password());
    ScramExchange scram;
    scram.run(login);
    auto final_reply = feed(login, ServerSays(12, scram.server_final));
    CHECK(final_reply.ok);
    auto ok = feed(login, kOk);
    CHECK(ok.ok);
    CHECK(ok.authenticated);
}

TEST_CASE("server_login: a wrong server signature ends the login") {
    ServerLogin login(with_password());
    ScramExchange scram;
    scram.run(login);
    // 32 zero bytes instead of the ServerSignature.
    auto reply = feed(login, ServerSays(12, "v=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="));
    CHECK_FALSE(reply.ok);
    CHECK(reply.error.find("signature") != std::string::npos);
}

TEST_CASE("server_login: AuthenticationOk without SASLFinal once SCRAM began is refused") {
    SUBCASE("right after AuthenticationSASL") {
        ServerLogin login(with_password());
        REQUIRE(feed(login, kSasl).ok);
        auto ok = feed(login, kOk);
        CHECK_FALSE(ok.ok);
        CHECK_FALSE(ok.authenticated);
        CHECK(ok.error.find("before completing the SCRAM exchange") != std::string::npos);
    }
    SUBCASE("after the client's proof, skipping the server's") {
        ServerLogin login(with_password());
        ScramExchange scram;
        scram.run(login);
        auto ok = feed(login, kOk);
        CHECK_FALSE(ok.ok);
        CHECK_FALSE(ok.authenticated);
    }
    SUBCASE("a second SASLFinal cannot stand in for anything") {
        ServerLogin login(with_password());
        ScramExchange scram;
        scram.run(login);
        REQUIRE(feed(login, ServerSays(12, scram.server_final)).ok);
        CHECK_FALSE(feed(login, ServerSays(12, scram.server_final)).ok);
    }
    SUBCASE("a downgrade to a cleartext or md5 request in the middle of SCRAM") {
        for (const ServerSays* downgrade : {&kCleartext, &kMd5}) {
            ServerLogin login(with_password());
            REQUIRE(feed(login, kSasl).ok);
            auto reply = feed(login, *downgrade);
            CHECK_FALSE(reply.ok);
            CHECK(reply.send.empty());
        }
    }
}

TEST_CASE("server_login: without server_require_auth every method is answered") {
    ServerLogin cleartext(with_password());
    auto reply = feed(cleartext, kCleartext);
    CHECK(reply.ok);
    CHECK(reply.send == std::string("p") + be32(4 + 7) + std::string("pencil\0", 7));
    CHECK(feed(cleartext, kOk).authenticated);

    ServerLogin md5(with_password());
    CHECK(feed(md5, kMd5).ok);
    CHECK(feed(md5, kOk).authenticated);

    ServerLogin trust(with_password());
    CHECK(feed(trust, kOk).authenticated);
}

TEST_CASE("server_login: server_require_auth refuses what it does not allow, sending nothing") {
    struct Row {
        const char* require_auth;
        const ServerSays* request;
        const char* refusal;  // nullptr: answered
    };
    const Row rows[] = {
        {"scram-sha-256", &kCleartext, "server requested a cleartext password"},
        {"scram-sha-256", &kMd5, "server requested a hashed password"},
        {"scram-sha-256", &kSasl, nullptr},
        {"!password", &kCleartext, "server requested a cleartext password"},
        {"!password", &kMd5, nullptr},
        {"!password,!md5", &kMd5, "server requested a hashed password"},
        {"!password,!md5", &kSasl, nullptr},
        {"md5,password", &kCleartext, nullptr},
        {"md5,password", &kSasl, "server requested SASL authentication"},
        {"none", &kCleartext, "server requested a cleartext password"},
        {"!scram-sha-256", &kSasl, "server requested SASL authentication"},
        {"!none", &kCleartext, nullptr},
    };
    for (const auto& row : rows) {
        CAPTURE(row.require_auth);
        CAPTURE(row.refusal);
        ServerLogin login(with_password(row.require_auth));
        auto reply = feed(login, *row.request);
        if (row.refusal) {
            CHECK_FALSE(reply.ok);
            CHECK(reply.send.empty());  // the password never leaves pgtether
            CHECK(reply.error == std::string("authentication method requirement \"") +
                                     row.require_auth +
                                     "\" (server_require_auth) failed: " + row.refusal);
        } else {
            CHECK(reply.ok);
            CHECK_FALSE(reply.send.empty());
        }
    }
}

TEST_CASE("server_login: AuthenticationOk without any exchange, against server_require_auth") {
    for (const char* require_auth : {"scram-sha-256", "password,md5", "!none"}) {
        CAPTURE(require_auth);
        ServerLogin login(with_password(require_auth));
        auto ok = feed(login, kOk);
        CHECK_FALSE(ok.ok);
        CHECK(ok.error.find("server did not complete authentication") != std::string::npos);
    }
    for (const char* require_auth : {"", "none", "scram-sha-256,none", "!password"}) {
        CAPTURE(require_auth);
        ServerLogin login(with_password(require_auth));
        CHECK(feed(login, kOk).authenticated);
    }
    // After an answered cleartext request, Ok completes the login as libpq sees it.
    ServerLogin login(with_password("password"));
    REQUIRE(feed(login, kCleartext).ok);
    CHECK(feed(login, kOk).authenticated);
}

TEST_CASE("require_auth: parsing as libpq does") {
    struct Row {
        const char* text;
        bool valid;
        std::uint8_t allowed;
    };
    using B = AuthMethodBit;
    auto bits = [](std::initializer_list<B> list) {
        std::uint8_t out = 0;
        for (B b : list)
            out = static_cast<std::uint8_t>(out | static_cast<std::uint8_t>(b));
        return out;
    };
    const Row rows[] = {
        {"", true, RequireAuth::kAll},
        {"  ", true, RequireAuth::kAll},
        {"password", true, bits({B::Password})},
        {"scram-sha-256, none", true, bits({B::Scram, B::None})},
        {"!password,!md5", true,
         static_cast<std::uint8_t>(RequireAuth::kAll & ~bits({B::Password, B::Md5}))},
        {"!none", true, static_cast<std::uint8_t>(RequireAuth::kAll & ~bits({B::None}))},
        {"gss,sspi,oauth", true, bits({B::Gss, B::Sspi, B::OAuth})},
        {"password,!md5", false, 0},
        {"!md5,password", false, 0},
        {"md5,md5", false, 0},
        {"scram", false, 0},
        {"SCRAM-SHA-256", false, 0},
        {"password,", false, 0},
        {"!", false, 0},
    };
    for (const auto& row : rows) {
        CAPTURE(row.text);
        auto parsed = parse_require_auth(row.text);
        CHECK(static_cast<bool>(parsed) == row.valid);
        if (parsed && row.valid) CHECK(parsed.value->allowed == row.allowed);
        if (!parsed) CHECK_FALSE(parsed.error.empty());
    }
}

// ---- the login read message by message (ServerLogin::on_message) ----

namespace {

// The body of the one message `build` appends.
template <typename Build>
std::string body_of(Build build) {
    std::string out;
    build(out);
    return out.substr(5);
}

}  // namespace

TEST_CASE("a login's messages, one step each") {
    using Kind = ServerLogin::Step::Kind;
    struct Row {
        const char* what;
        char type;
        std::string body;
        Kind kind;
        bool sends;
    };
    const std::vector<Row> table = {
        {"cleartext request", 'R', kCleartext.body, Kind::Continue, true},
        {"malformed authentication", 'R', "\x00\x00", Kind::Invalid, false},
        {"parameter", 'S',
         body_of([](std::string& o) { protocol::append_parameter_status(o, "TimeZone", "UTC"); }),
         Kind::Continue, false},
        {"backend key", 'K', body_of([](std::string& o) {
             protocol::append_backend_key_data(o, {42, 7});
         }),
         Kind::Continue, false},
        {"notice", 'N', std::string("SNOTICE\0\0", 9), Kind::Continue, false},
        {"ready", 'Z', "I", Kind::Ready, false},
        {"server error", 'E', body_of([](std::string& o) {
             protocol::append_error_response(o, {"FATAL", "28P01", "bad password", {}, {}});
         }),
         Kind::ServerError, false},
        {"garbled error", 'E', "", Kind::Invalid, false},
        {"a query's reply during login", 'D', std::string("\0\0", 2), Kind::Invalid, false},
    };
    for (const auto& row : table) {
        CAPTURE(row.what);
        ServerLogin login(with_password());
        auto step = login.on_message(row.type, protocol::as_bytes(row.body));
        CHECK(step.kind == row.kind);
        CHECK(step.send.empty() == !row.sends);
    }
    ServerLogin login(with_password());
    auto parameter = login.on_message('S', protocol::as_bytes(table[2].body));
    REQUIRE(parameter.parameter);
    CHECK(parameter.parameter->name == "TimeZone");
    CHECK(parameter.parameter->value == "UTC");
    auto key = login.on_message('K', protocol::as_bytes(table[3].body));
    REQUIRE(key.backend_key);
    CHECK(key.backend_key->pid == 42);
    auto error = login.on_message('E', protocol::as_bytes(table[6].body));
    CHECK(error.error.sqlstate == "28P01");
    auto unexpected = login.on_message('D', protocol::as_bytes(table[8].body));
    CHECK(unexpected.text == "unexpected message from server during login: 'D'");
    // Refused: server_require_auth forbids what the server asks for.
    ServerLogin strict(with_password("scram-sha-256"));
    auto refused = strict.on_message('R', protocol::as_bytes(kCleartext.body));
    CHECK(refused.kind == Kind::Refused);
    CHECK(refused.send.empty());
    CHECK(refused.text.find("server_require_auth") != std::string::npos);
}
