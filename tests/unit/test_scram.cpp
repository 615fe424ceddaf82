#include <doctest/doctest.h>

#include <string>

#include "protocol/base64.hpp"
#include "protocol/scram.hpp"

using namespace pgtether::protocol;
using Status = ScramServer::Status;

namespace {

std::string unbase64(std::string_view text) {
    auto raw = base64_decode(text);
    REQUIRE(raw.has_value());
    return *raw;
}

// ---- RFC 7677 section 3: user "user", password "pencil" ----
constexpr const char* kRfcSalt = "W22ZaJ0SNY7soEsUEjb6gQ==";
constexpr const char* kRfcClientNonce = "rOprNGfwEbeRWgbNEkqO";
constexpr const char* kRfcServerNonce = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0";
constexpr const char* kRfcClientFirst = "n,,n=user,r=rOprNGfwEbeRWgbNEkqO";
constexpr const char* kRfcServerFirst =
    "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096";
constexpr const char* kRfcClientFinal =
    "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
    "p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=";
constexpr const char* kRfcServerFinal = "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=";
constexpr const char* kRfcNonce = "rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0";
constexpr const char* kRfcProof = "dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=";

ScramSecret rfc_secret() {
    return make_scram_secret("pencil", unbase64(kRfcSalt), 4096);
}

// A server that has accepted the RFC's client-first-message and waits for the final one.
ScramServer rfc_server_after_first() {
    ScramServer server = ScramServer::with_printable_nonce(rfc_secret(), kRfcServerNonce);
    auto step = server.client_first(kRfcClientFirst);
    REQUIRE(step.status == Status::Continue);
    REQUIRE(step.message == kRfcServerFirst);
    return server;
}

// ---- PostgreSQL 15.18 fixtures ----
// Roles created with `SET password_encryption = 'scram-sha-256'; CREATE ROLE ... PASSWORD ...`,
// secrets read from pg_authid.rolpassword. The exchanges were captured on the wire between psql
// (libpq 15, sslmode=disable, so no channel binding) and that server, pg_hba method scram-sha-256.
struct PgExchange {
    const char* password;
    const char* secret;
    const char* client_first;
    const char* server_first;
    const char* client_final;
    const char* server_final;  // nullptr: PostgreSQL rejected the login
};

// carol / "correct horse battery staple"
constexpr const char* kCarolSecret =
    "SCRAM-SHA-256$4096:H4TAjuy5zZ+rzZvNOwFUiw==$AhQ7IJwNviBadzvP6FOMfOqmqzYsAObQ0XDVJnLgWn0=:"
    "CacCd8P5aJaHRNV9pLX+fhVXJ4jFtie314vTLfCRUOI=";
// dave / "pencil"
constexpr const char* kDaveSecret =
    "SCRAM-SHA-256$4096:fLy1hBVpXZEvn+LLSMvfzw==$5sZH5bKeiir8Ha6mvL894a0Z1PkHQN6qkKMspIP1rBg=:"
    "df43wKy4K6gEzs2Ydg2T9Hq6SvVBoXlqJ59txiNPMFw=";
// erin / E'I\u00ADX': SASLprep maps the soft hyphen to nothing (RFC 4013 section 3 example), so
// PostgreSQL and libpq both hash "IX".
constexpr const char* kErinSecret =
    "SCRAM-SHA-256$4096:VkJDavvpT+5fcEmwmPWZRA==$NVQYzDCdNNLugOlYuAGstgSTZUBFUnM/ulENGb8vQzE=:"
    "wOFu9U/8P/ZIt9jnxiB6Ck8rR5SD5n1Xnm8x4ZWzKiA=";

const PgExchange kCarolLogin = {
    "correct horse battery staple",
    kCarolSecret,
    "n,,n=,r=0NpML+ykwT8eCMdbfvytZPJj",
    "r=0NpML+ykwT8eCMdbfvytZPJjNHLAiVYsTJ54EMUqlz99yAL+,s=H4TAjuy5zZ+rzZvNOwFUiw==,i=4096",
    "c=biws,r=0NpML+ykwT8eCMdbfvytZPJjNHLAiVYsTJ54EMUqlz99yAL+,"
    "p=gLyG407zxCnEvj1sLvfUX5LK5I/iw0KcHDVXAue87EQ=",
    "v=2/vHAg92XMDgMNDQUGyJKJOKVyeS2hhbdVUka7E7j4g=",
};
// carol with password "wrong horse": PostgreSQL answered 28P01.
const PgExchange kCarolWrongPassword = {
    "wrong horse",
    kCarolSecret,
    "n,,n=,r=vNZRA0dSLdCy9QhovVdxWWCJ",
    "r=vNZRA0dSLdCy9QhovVdxWWCJ4XfWo4FKqlCeMECr0DhvNs0p,s=H4TAjuy5zZ+rzZvNOwFUiw==,i=4096",
    "c=biws,r=vNZRA0dSLdCy9QhovVdxWWCJ4XfWo4FKqlCeMECr0DhvNs0p,"
    "p=g3Fv1HFgmwqkt5u0vmuIjd5vliCosbVOXGBEUJG+cdg=",
    nullptr,
};
const PgExchange kDaveLogin = {
    "pencil",
    kDaveSecret,
    "n,,n=,r=tVb5jjzD/vhC8WQ6Ehu2bIc/",
    "r=tVb5jjzD/vhC8WQ6Ehu2bIc/M06FrbalQMWzfRDIzyMEJFma,s=fLy1hBVpXZEvn+LLSMvfzw==,i=4096",
    "c=biws,r=tVb5jjzD/vhC8WQ6Ehu2bIc/M06FrbalQMWzfRDIzyMEJFma,"
    "p=FMsI8k15S+EHFGrByVPJAAdx1fWa8YYNP6bjoxNcOYk=",
    "v=e3eQtR36DzTLwRXFrAZ7uditO+ZZsanSMRXFpiZZ+zc=",
};
// Logged in with the password bytes "I\xC2\xADX"; libpq sent the proof for the SASLprep'd "IX".
const PgExchange kErinLogin = {
    "IX",
    kErinSecret,
    "n,,n=,r=R2gdZs+e20b7O7Ra/5YLMEIv",
    "r=R2gdZs+e20b7O7Ra/5YLMEIv1skhjJkVhg00e7iLWI+P1i/b,s=VkJDavvpT+5fcEmwmPWZRA==,i=4096",
    "c=biws,r=R2gdZs+e20b7O7Ra/5YLMEIv1skhjJkVhg00e7iLWI+P1i/b,"
    "p=FHOfJDh0zTbtJvCQ5kd0Mj59fX+l9qnc/SbhkpSpeOs=",
    "v=wHzh/bzLdF8bhapDNmaIaDe05B8VnA75A80rlMkqORE=",
};

// The raw client nonce libpq generated ("n,,n=,r=" + base64 of 18 random bytes).
std::string client_nonce_bytes(const PgExchange& e) {
    return unbase64(std::string_view(e.client_first).substr(8));
}
// The raw bytes behind PostgreSQL's half of the combined nonce.
std::string server_nonce_bytes(const PgExchange& e) {
    std::string_view first(e.server_first);
    std::string_view client_nonce = std::string_view(e.client_first).substr(8);
    std::string_view combined = first.substr(2, first.find(',') - 2);
    return unbase64(combined.substr(client_nonce.size()));
}

}  // namespace

TEST_CASE("scram: RFC 7677 section 3 exchange, client and server") {
    ScramClient client("pencil", unbase64(kRfcClientNonce), "user");
    ScramServer server = ScramServer::with_printable_nonce(rfc_secret(), kRfcServerNonce);

    CHECK(client.client_first() == kRfcClientFirst);
    auto first = server.client_first(client.client_first());
    REQUIRE(first.status == Status::Continue);
    CHECK(first.message == kRfcServerFirst);

    auto client_final = client.handle_server_first(first.message);
    REQUIRE(client_final.has_value());
    CHECK(*client_final == kRfcClientFinal);

    CHECK_FALSE(server.client_key().has_value());
    auto last = server.client_final(*client_final);
    REQUIRE(last.status == Status::Done);
    CHECK(last.message == kRfcServerFinal);
    CHECK(client.verify_server_final(last.message));

    // The revealed ClientKey lets a password-less client produce the same proof (pass-through).
    REQUIRE(server.client_key().has_value());
    const ScramSecret secret = rfc_secret();
    ScramClient by_keys(*server.client_key(), secret.server_key, unbase64(kRfcClientNonce), "user");
    CHECK(by_keys.client_first() == kRfcClientFirst);
    CHECK(by_keys.handle_server_first(kRfcServerFirst) == kRfcClientFinal);
    CHECK(by_keys.verify_server_final(kRfcServerFinal));
}

TEST_CASE("scram: a key deriver's keys are the ones used, and give the RFC 7677 exchange") {
    // What the default derivation gives, handed back through a deriver that counts its calls:
    // the same client-final-message and server signature.
    int calls = 0;
    std::string seen_salt;
    int seen_iterations = 0;
    ScramClient client("pencil", unbase64(kRfcClientNonce), "user");
    client.set_key_deriver([&](std::string_view password, std::string_view salt, int iterations) {
        ++calls;
        seen_salt = std::string(salt);
        seen_iterations = iterations;
        return pgtether::protocol::derive_scram_client_keys(password, salt, iterations);
    });
    CHECK(client.handle_server_first(kRfcServerFirst) == kRfcClientFinal);
    CHECK(client.verify_server_final(kRfcServerFinal));
    CHECK(calls == 1);
    CHECK(seen_salt == rfc_secret().salt);
    CHECK(seen_iterations == 4096);
    // Wrong keys from a deriver make a wrong proof; none at all fail the exchange.
    ScramClient wrong("pencil", unbase64(kRfcClientNonce), "user");
    wrong.set_key_deriver([](std::string_view, std::string_view salt, int iterations) {
        return pgtether::protocol::derive_scram_client_keys("not pencil", salt, iterations);
    });
    auto wrong_final = wrong.handle_server_first(kRfcServerFirst);
    REQUIRE(wrong_final.has_value());
    CHECK(*wrong_final != kRfcClientFinal);
    ScramClient failing("pencil", unbase64(kRfcClientNonce), "user");
    failing.set_key_deriver([](std::string_view, std::string_view, int) {
        return std::optional<pgtether::protocol::ScramClientKeys>{};
    });
    CHECK_FALSE(failing.handle_server_first(kRfcServerFirst).has_value());
}

TEST_CASE("scram: secrets match what PostgreSQL 15 stores in pg_authid") {
    struct Case {
        const char* password;
        const char* secret;
    };
    const Case cases[] = {{"correct horse battery staple", kCarolSecret},
                          {"pencil", kDaveSecret},
                          {"IX", kErinSecret}};
    for (const auto& c : cases) {
        CAPTURE(c.secret);
        auto parsed = parse_scram_secret(c.secret);
        REQUIRE(parsed.has_value());
        CHECK(parsed->iterations == 4096);
        CHECK(parsed->salt.size() == 16);
        CHECK(format_scram_secret(*parsed) == c.secret);
        // Same salt and iteration count: the same secret, byte for byte.
        CHECK(format_scram_secret(
                  make_scram_secret(c.password, parsed->salt, parsed->iterations)) == c.secret);
    }
    // The documented SASLprep gap: we hash the raw bytes, PostgreSQL hashed the normalized "IX".
    auto erin = parse_scram_secret(kErinSecret);
    REQUIRE(erin.has_value());
    CHECK(format_scram_secret(make_scram_secret("I\xC2\xADX", erin->salt, erin->iterations)) !=
          kErinSecret);
    // Another password with the same salt gives another secret.
    auto dave = parse_scram_secret(kDaveSecret);
    REQUIRE(dave.has_value());
    CHECK(format_scram_secret(make_scram_secret("pencil ", dave->salt, dave->iterations)) !=
          kDaveSecret);
}

TEST_CASE("scram: ScramServer reproduces PostgreSQL's side of real libpq logins") {
    for (const PgExchange* e : {&kCarolLogin, &kDaveLogin, &kErinLogin}) {
        CAPTURE(e->secret);
        auto secret = parse_scram_secret(e->secret);
        REQUIRE(secret.has_value());
        ScramServer server(*secret, server_nonce_bytes(*e));
        auto first = server.client_first(e->client_first);
        REQUIRE(first.status == Status::Continue);
        CHECK(first.message == e->server_first);
        auto last = server.client_final(e->client_final);
        REQUIRE(last.status == Status::Done);
        CHECK(last.message == e->server_final);
        CHECK(server.client_key().has_value());
    }
    // The login PostgreSQL refused is refused here too, as a wrong password (28P01).
    auto secret = parse_scram_secret(kCarolWrongPassword.secret);
    REQUIRE(secret.has_value());
    ScramServer server(*secret, server_nonce_bytes(kCarolWrongPassword));
    auto first = server.client_first(kCarolWrongPassword.client_first);
    REQUIRE(first.status == Status::Continue);
    CHECK(first.message == kCarolWrongPassword.server_first);
    auto last = server.client_final(kCarolWrongPassword.client_final);
    CHECK(last.status == Status::Failed);
    CHECK_FALSE(last.protocol_violation);
    CHECK_FALSE(server.client_key().has_value());
}

TEST_CASE("scram: ScramClient reproduces libpq's side of real logins") {
    for (const PgExchange* e : {&kCarolLogin, &kCarolWrongPassword, &kDaveLogin, &kErinLogin}) {
        CAPTURE(e->client_final);
        ScramClient client(e->password, client_nonce_bytes(*e));
        CHECK(client.client_first() == e->client_first);
        CHECK(client.handle_server_first(e->server_first) == e->client_final);
        if (e->server_final != nullptr) CHECK(client.verify_server_final(e->server_final));
    }
    // Against carol's real server-final, a client that used the wrong password does not accept
    // the server's signature (it depends on ServerKey, which the wrong password does not give).
    ScramClient wrong("wrong horse", client_nonce_bytes(kCarolLogin));
    REQUIRE(wrong.handle_server_first(kCarolLogin.server_first).has_value());
    CHECK_FALSE(wrong.verify_server_final(kCarolLogin.server_final));
}

TEST_CASE("scram: client against a server built from a PostgreSQL secret") {
    auto secret = parse_scram_secret(kCarolSecret);
    REQUIRE(secret.has_value());

    SUBCASE("right password") {
        ScramClient client("correct horse battery staple", "client nonce bytes");
        ScramServer server(*secret, "server nonce bytes");
        auto first = server.client_first(client.client_first());
        REQUIRE(first.status == Status::Continue);
        auto final_message = client.handle_server_first(first.message);
        REQUIRE(final_message.has_value());
        auto last = server.client_final(*final_message);
        REQUIRE(last.status == Status::Done);
        CHECK(client.verify_server_final(last.message));

        // Pass-through: the learnt ClientKey plus the stored ServerKey log in again, no password.
        REQUIRE(server.client_key().has_value());
        ScramClient by_keys(*server.client_key(), secret->server_key, "another nonce");
        ScramServer again(*secret, "another server nonce");
        auto first2 = again.client_first(by_keys.client_first());
        REQUIRE(first2.status == Status::Continue);
        auto final2 = by_keys.handle_server_first(first2.message);
        REQUIRE(final2.has_value());
        auto last2 = again.client_final(*final2);
        REQUIRE(last2.status == Status::Done);
        CHECK(by_keys.verify_server_final(last2.message));
        CHECK(again.client_key() == server.client_key());
    }
    SUBCASE("wrong password") {
        ScramClient client("Correct horse battery staple", "client nonce bytes");
        ScramServer server(*secret, "server nonce bytes");
        auto first = server.client_first(client.client_first());
        REQUIRE(first.status == Status::Continue);
        auto final_message = client.handle_server_first(first.message);
        REQUIRE(final_message.has_value());
        auto last = server.client_final(*final_message);
        CHECK(last.status == Status::Failed);
        CHECK_FALSE(last.protocol_violation);
        CHECK_FALSE(server.client_key().has_value());
        // Nothing more is accepted after a failure.
        CHECK(server.client_final(*final_message).status == Status::Failed);
    }
    SUBCASE("keys of another secret: server refuses, or client refuses the server") {
        const ScramSecret other = make_scram_secret("pencil", secret->salt, secret->iterations);
        // A client holding another ClientKey fails the proof.
        ScramClient client(other.stored_key, secret->server_key, "nonce");
        ScramServer server(*secret, "server nonce");
        auto first = server.client_first(client.client_first());
        REQUIRE(first.status == Status::Continue);
        auto final_message = client.handle_server_first(first.message);
        REQUIRE(final_message.has_value());
        CHECK(server.client_final(*final_message).status == Status::Failed);
    }
}

TEST_CASE("scram: a server impersonating PostgreSQL without the ServerKey is detected") {
    // The server knows the right StoredKey (accepts the proof) but signs with a wrong ServerKey.
    ScramSecret secret = rfc_secret();
    secret.server_key[0] ^= 1;
    ScramServer server = ScramServer::with_printable_nonce(secret, kRfcServerNonce);
    ScramClient client("pencil", unbase64(kRfcClientNonce), "user");
    REQUIRE(server.client_first(client.client_first()).status == Status::Continue);
    auto final_message = client.handle_server_first(kRfcServerFirst);
    REQUIRE(final_message.has_value());
    auto last = server.client_final(*final_message);
    REQUIRE(last.status == Status::Done);
    CHECK(last.message != kRfcServerFinal);
    CHECK_FALSE(client.verify_server_final(last.message));
}

TEST_CASE("scram: client-first-message forms the server accepts") {
    const char* accepted[] = {
        "n,,n=,r=abc",             // libpq: empty user name
        "n,,n=user,r=abc",         // any user name, ignored
        "y,,n=,r=abc",             // client could bind, believes we cannot (we offer no -PLUS)
        "n,,n=a=2Cb=3Dc,r=abc",    // escaped user name
        "n,,n=x,r=abc,x=ignored",  // extension after the nonce, ignored like PostgreSQL does
        "n,,n=\xc3\xbc,r=!~",      // UTF-8 user name; nonce of printable edge characters
    };
    for (const char* message : accepted) {
        CAPTURE(message);
        ScramServer server(rfc_secret(), "nonce");
        auto step = server.client_first(message);
        CHECK(step.status == Status::Continue);
        std::string_view client_nonce =
            std::string_view(message).substr(std::string_view(message).find(",r=") + 3);
        client_nonce = client_nonce.substr(0, client_nonce.find(','));
        CHECK(step.message == "r=" + std::string(client_nonce) + base64_encode("nonce") +
                                  ",s=" + kRfcSalt + ",i=4096");
    }
}

TEST_CASE("scram: malformed client-first-messages are refused as protocol violations") {
    const std::string invalid[] = {
        "",
        "n",
        "n,",
        "n,,",
        "n,,n=",
        "n,,n=user",                       // no nonce
        "n,,r=abc",                        // no user name attribute
        "N,,n=,r=abc",                     // flags are lowercase
        "x,,n=,r=abc",                     // unknown flag
        "nn,,n=,r=abc",                    // flag is one letter
        "n,x,n=,r=abc",                    // junk where the authzid goes
        "n,a=bob,n=,r=abc",                // authzid: not supported
        "n,,m=ext,n=,r=abc",               // mandatory extension
        "n,,n=,r=",                        // empty nonce
        "n,,n=,r=ab c",                    // space is not printable
        "n,,n=,r=ab\x7f",                  // DEL
        "n,,n=,r=\xc3\xa9",                // non-ASCII nonce
        "n,,n=,r=abc,",                    // trailing comma
        "n,,n=,r=abc,r=def",               // repeated attribute
        "n,,n=,r=abc,p=abc",               // a known attribute is not an extension
        "n,,n=,r=abc,x",                   // extension without "="
        "n,,n=,r=abc,x=",                  // extension without value
        "n,,n=,r=abc,xy=z",                // attribute names are one letter
        "n,,nn=,r=abc",                    // attribute name "nn"
        "n,,n=,R=abc",                     // attribute names are case-sensitive
        "n,,r=abc,n=",                     // order matters
        std::string("n,,n=,r=abc\0", 12),  // NUL
        std::string("n,,n=\0,r=abc", 12),  // NUL
        "c=biws,r=abc,p=abc",              // a client-final-message
        " n,,n=,r=abc",                    // leading space
    };
    for (const auto& message : invalid) {
        CAPTURE(message);
        ScramServer server(rfc_secret(), "nonce");
        auto step = server.client_first(message);
        CHECK(step.status == Status::Failed);
        CHECK(step.protocol_violation);
        CHECK_FALSE(step.message.empty());
        // A failed exchange stays failed.
        CHECK(server.client_first("n,,n=,r=abc").status == Status::Failed);
        CHECK(server.client_final(kRfcClientFinal).status == Status::Failed);
    }
}

TEST_CASE("scram: channel binding requests are refused") {
    for (const char* message :
         {"p=tls-server-end-point,,n=,r=abc", "p=tls-unique,,n=,r=abc", "p=,,n=,r=abc"}) {
        CAPTURE(message);
        ScramServer server(rfc_secret(), "nonce");
        auto step = server.client_first(message);
        CHECK(step.status == Status::Failed);
        CHECK(step.protocol_violation);
        CHECK(step.message.find("channel binding") != std::string::npos);
    }
}

TEST_CASE("scram: malformed or wrong client-final-messages are refused") {
    const std::string nonce = kRfcNonce;
    const std::string proof = kRfcProof;
    // The RFC's final message is accepted by a fresh server: the cases below fail for their change.
    {
        ScramServer server = rfc_server_after_first();
        REQUIRE(server.client_final(kRfcClientFinal).status == Status::Done);
    }
    struct Case {
        std::string message;
        bool protocol_violation;
    };
    std::string flipped = proof;
    flipped[0] = flipped[0] == 'd' ? 'e' : 'd';
    const Case cases[] = {
        {"", true},
        {"c=biws", true},
        {"c=biws,r=" + nonce, true},                   // no proof
        {"c=biws,r=" + nonce + ",p=", true},           // empty proof
        {"r=" + nonce + ",p=" + proof, true},          // no channel binding attribute
        {"c=eSws,r=" + nonce + ",p=" + proof, true},   // "y,," but the client sent "n,,"
        {"c=,r=" + nonce + ",p=" + proof, true},       // empty channel binding
        {"c=biws=,r=" + nonce + ",p=" + proof, true},  // not base64 of "n,,"
        {"c=cD10bHMtc2VydmVyLWVuZC1wb2ludCws,r=" + nonce + ",p=" + proof, true},  // "p=...,,"
        {"c=biws,r=rOprNGfwEbeRWgbNEkqO,p=" + proof, true},  // only the client nonce
        {"c=biws,r=" + nonce + "x,p=" + proof, true},        // longer nonce
        {"c=biws,r=" + nonce.substr(0, nonce.size() - 1) + ",p=" + proof, true},  // shorter
        {"c=biws,p=" + proof, true},                                              // nonce missing
        {"c=biws,r=" + nonce + ",p=" + proof.substr(0, proof.size() - 1), true},  // truncated
        {"c=biws,r=" + nonce + ",p=" + proof.substr(0, proof.size() - 4), true},  // 30 bytes
        {"c=biws,r=" + nonce + ",p=" + proof + "AAAA", true},                     // 35 bytes
        {"c=biws,r=" + nonce + ",p=" + proof + ",", true},                        // trailing comma
        {"c=biws,r=" + nonce + ",p=" + proof + ",x=y", true},             // proof must be last
        {"c=biws,r=" + nonce + ",p=!" + proof.substr(1), true},           // not base64
        {"c=biws,r=" + nonce + ",r=" + nonce + ",p=" + proof, true},      // repeated attribute
        {"c=biws,r=" + nonce + ",x,p=" + proof, true},                    // malformed extension
        {std::string("c=biws,r=") + nonce + ",p=" + proof + '\0', true},  // NUL
        {"c=biws,r=" + nonce + ",p=" + flipped, false},                   // wrong proof
        // A well-formed extension is skipped, but it is part of AuthMessage: proof no longer fits.
        {"c=biws,r=" + nonce + ",x=ext,p=" + proof, false},
    };
    for (const auto& c : cases) {
        CAPTURE(c.message);
        ScramServer server = rfc_server_after_first();
        auto step = server.client_final(c.message);
        CHECK(step.status == Status::Failed);
        CHECK(step.protocol_violation == c.protocol_violation);
        CHECK_FALSE(server.client_key().has_value());
        CHECK(server.client_final(kRfcClientFinal).status == Status::Failed);
    }
}

TEST_CASE("scram: channel binding flag must be echoed as sent") {
    // "y,," must come back as c=eSws; the proof then fails (the RFC's proof is for "biws") but the
    // message gets past the channel binding check, unlike c=biws.
    ScramServer server = ScramServer::with_printable_nonce(rfc_secret(), kRfcServerNonce);
    REQUIRE(server.client_first("y,,n=user,r=rOprNGfwEbeRWgbNEkqO").status == Status::Continue);
    auto step = server.client_final(std::string("c=eSws,r=") + kRfcNonce + ",p=" + kRfcProof);
    CHECK(step.status == Status::Failed);
    CHECK_FALSE(step.protocol_violation);

    ScramServer downgraded = ScramServer::with_printable_nonce(rfc_secret(), kRfcServerNonce);
    REQUIRE(downgraded.client_first("y,,n=user,r=rOprNGfwEbeRWgbNEkqO").status == Status::Continue);
    auto step2 = downgraded.client_final(kRfcClientFinal);
    CHECK(step2.status == Status::Failed);
    CHECK(step2.protocol_violation);
}

TEST_CASE("scram: server steps out of order fail") {
    ScramServer early(rfc_secret(), "nonce");
    CHECK(early.client_final(kRfcClientFinal).status == Status::Failed);

    ScramServer twice = rfc_server_after_first();
    CHECK(twice.client_first(kRfcClientFirst).status == Status::Failed);

    ScramServer done = rfc_server_after_first();
    REQUIRE(done.client_final(kRfcClientFinal).status == Status::Done);
    CHECK(done.client_final(kRfcClientFinal).status == Status::Failed);
    CHECK_FALSE(done.client_key().has_value());
}

TEST_CASE("scram: a server with an unusable secret or nonce refuses every client") {
    ScramServer no_secret(ScramSecret{}, "nonce");
    auto step = no_secret.client_first(kRfcClientFirst);
    CHECK(step.status == Status::Failed);
    CHECK_FALSE(step.protocol_violation);

    ScramServer failed_secret(make_scram_secret("pencil", unbase64(kRfcSalt), 0), "nonce");
    CHECK(failed_secret.client_first(kRfcClientFirst).status == Status::Failed);

    ScramServer empty_nonce(rfc_secret(), "");
    CHECK(empty_nonce.client_first(kRfcClientFirst).status == Status::Failed);
    ScramServer bad_nonce = ScramServer::with_printable_nonce(rfc_secret(), "a,b");
    CHECK(bad_nonce.client_first(kRfcClientFirst).status == Status::Failed);
}

TEST_CASE("scram: ScramClient validates server-first-message") {
    const std::string salt = kRfcSalt;
    const std::string nonce = kRfcNonce;
    const char* rejected[] = {
        "",
        "r=rOprNGfwEbeRWgbNEkqO,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096",     // nonce not extended
        "r=rOprNGfwEbeRWgbNEkq,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096",      // shorter than ours
        "r=xOprNGfwEbeRWgbNEkqOabc,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096",  // does not start with ours
        "r=abcrOprNGfwEbeRWgbNEkqO,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096",  // ours not as prefix
        "r=rOprNGfwEbeRWgbNEkqO x,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096",   // not printable
        "s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096",                            // no nonce
        "m=ext,r=rOprNGfwEbeRWgbNEkqOx,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096",
        "r=rOprNGfwEbeRWgbNEkqOx,i=4096",                              // no salt
        "r=rOprNGfwEbeRWgbNEkqOx,s=,i=4096",                           // empty salt
        "r=rOprNGfwEbeRWgbNEkqOx,s=W22ZaJ0SNY7soEsUEjb6gQ=,i=4096",    // truncated base64
        "r=rOprNGfwEbeRWgbNEkqOx,s=W22ZaJ0SNY7soEsUEjb6gQ,i=4096",     // padding missing
        "r=rOprNGfwEbeRWgbNEkqOx,s=W22Z aJ0SNY7soEsUEjb6gQ==,i=4096",  // not base64
        "r=rOprNGfwEbeRWgbNEkqOx,i=4096,s=W22ZaJ0SNY7soEsUEjb6gQ==",   // order
        "r=rOprNGfwEbeRWgbNEkqOx,s=W22ZaJ0SNY7soEsUEjb6gQ==",          // no iteration count
        "r=rOprNGfwEbeRWgbNEkqOx,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=",
        "r=rOprNGfwEbeRWgbNEkqOx,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=0",
        "r=rOprNGfwEbeRWgbNEkqOx,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=-1",
        "r=rOprNGfwEbeRWgbNEkqOx,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=+4096",
        "r=rOprNGfwEbeRWgbNEkqOx,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=04096",
        "r=rOprNGfwEbeRWgbNEkqOx,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096x",
        "r=rOprNGfwEbeRWgbNEkqOx,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=100001",
        "r=rOprNGfwEbeRWgbNEkqOx,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=2147483647",
        "r=rOprNGfwEbeRWgbNEkqOx,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=2147483648",
        "r=rOprNGfwEbeRWgbNEkqOx,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=99999999999999999999",
        "r=rOprNGfwEbeRWgbNEkqOx,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096,",     // trailing comma
        "r=rOprNGfwEbeRWgbNEkqOx,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096,x",    // junk
        "r=rOprNGfwEbeRWgbNEkqOx,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096,i=1",  // repeated
        "e=other-error",                                                  // an error message
        "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=",                 // a server-final
    };
    // The key-based client checks the same things without running PBKDF2, so even the absurd
    // iteration counts cost nothing here; the password client shares the parser.
    const ScramSecret secret = rfc_secret();
    for (const char* message : rejected) {
        CAPTURE(message);
        ScramClient client(ScramKey{}, secret.server_key, unbase64(kRfcClientNonce));
        CHECK_FALSE(client.handle_server_first(message).has_value());
        // Nothing to verify after a refused server-first-message.
        CHECK_FALSE(client.verify_server_final(kRfcServerFinal));
    }
    ScramClient with_nul("pencil", unbase64(kRfcClientNonce), "user");
    CHECK_FALSE(with_nul.handle_server_first(std::string(kRfcServerFirst) + '\0').has_value());

    // Limits are inclusive; a well-formed extension after the iteration count is ignored.
    for (const char* message :
         {"r=rOprNGfwEbeRWgbNEkqOx,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=1",
          "r=rOprNGfwEbeRWgbNEkqOx,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=100000",
          "r=rOprNGfwEbeRWgbNEkqOx,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096,x=ext"}) {
        CAPTURE(message);
        ScramClient client(ScramKey{}, secret.server_key, unbase64(kRfcClientNonce));
        CHECK(client.handle_server_first(message).has_value());
    }
}

TEST_CASE("scram: ScramClient handles one server-first-message only") {
    ScramClient client("pencil", unbase64(kRfcClientNonce), "user");
    REQUIRE(client.handle_server_first(kRfcServerFirst) == kRfcClientFinal);
    CHECK_FALSE(client.handle_server_first(kRfcServerFirst).has_value());
    CHECK(client.verify_server_final(kRfcServerFinal));  // the first exchange still stands

    ScramClient after_bad("pencil", unbase64(kRfcClientNonce), "user");
    CHECK_FALSE(after_bad.handle_server_first("garbage").has_value());
    CHECK_FALSE(after_bad.handle_server_first(kRfcServerFirst).has_value());
}

TEST_CASE("scram: ScramClient validates server-final-message") {
    ScramClient client("pencil", unbase64(kRfcClientNonce), "user");
    CHECK_FALSE(client.verify_server_final(kRfcServerFinal));  // nothing sent yet
    REQUIRE(client.handle_server_first(kRfcServerFirst).has_value());

    const std::string good = kRfcServerFinal;
    const std::string rejected[] = {
        "",
        "v=",
        "e=invalid-proof",
        "e=other-error,v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=",
        good.substr(0, good.size() - 1),                   // truncated base64
        good.substr(0, good.size() - 4),                   // 30 bytes
        good + "AAAA",                                     // 35 bytes
        "v=7rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=",  // wrong signature
        "V" + good.substr(1),                              // attribute case
        good + ",",                                        // trailing comma
        good + ",v=x",                                     // repeated
        good + '\0',                                       // NUL
        good.substr(2),                                    // no attribute name
    };
    for (const auto& message : rejected) {
        CAPTURE(message);
        CHECK_FALSE(client.verify_server_final(message));
    }
    CHECK(client.verify_server_final(good + ",x=ext"));  // extensions are ignored
    CHECK(client.verify_server_final(good));

    CHECK(ScramClient::server_error("e=invalid-proof") == "invalid-proof");
    CHECK(ScramClient::server_error("e=other-error,x=y") == "other-error");
    CHECK_FALSE(ScramClient::server_error(good).has_value());
    CHECK_FALSE(ScramClient::server_error("e=").has_value());
}

TEST_CASE("scram: client-first-message escapes the user name") {
    ScramClient client("pencil", unbase64(kRfcClientNonce), "a,b=c");
    CHECK(client.client_first() == "n,,n=a=2Cb=3Dc,r=rOprNGfwEbeRWgbNEkqO");
    ScramClient libpq_style("pencil", unbase64(kRfcClientNonce));
    CHECK(libpq_style.client_first() == "n,,n=,r=rOprNGfwEbeRWgbNEkqO");
    // An empty raw nonce cannot make a valid exchange.
    ScramClient no_nonce("pencil", "");
    CHECK_FALSE(no_nonce.handle_server_first("r=abc,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=1").has_value());
}

TEST_CASE("scram: stored secret parsing is strict") {
    const std::string good = kDaveSecret;
    REQUIRE(parse_scram_secret(good).has_value());
    const std::string rejected[] = {
        "",
        "pencil",
        "md56b765adf84f3c4341e8aab77ceda3bf1",
        "SCRAM-SHA-256",
        "SCRAM-SHA-256$",
        "scram-sha-256" + good.substr(13),
        "SCRAM-SHA-1" + good.substr(13),
        "SCRAM-SHA-256$4096:fLy1hBVpXZEvn+LLSMvfzw==",
        "SCRAM-SHA-256$4096:fLy1hBVpXZEvn+LLSMvfzw==$5sZH5bKeiir8Ha6mvL894a0Z1PkHQN6qkKMspIP1rBg=",
        "SCRAM-SHA-256$0:fLy1hBVpXZEvn+LLSMvfzw==$5sZH5bKeiir8Ha6mvL894a0Z1PkHQN6qkKMspIP1rBg=:"
        "df43wKy4K6gEzs2Ydg2T9Hq6SvVBoXlqJ59txiNPMFw=",
        "SCRAM-SHA-256$-4096:fLy1hBVpXZEvn+LLSMvfzw==$5sZH5bKeiir8Ha6mvL894a0Z1PkHQN6qkKMspIP1rBg=:"
        "df43wKy4K6gEzs2Ydg2T9Hq6SvVBoXlqJ59txiNPMFw=",
        "SCRAM-SHA-256$04096:fLy1hBVpXZEvn+LLSMvfzw==$5sZH5bKeiir8Ha6mvL894a0Z1PkHQN6qkKMspIP1rBg=:"
        "df43wKy4K6gEzs2Ydg2T9Hq6SvVBoXlqJ59txiNPMFw=",
        "SCRAM-SHA-256$2147483648:fLy1hBVpXZEvn+LLSMvfzw==$5sZH5bKeiir8Ha6mvL894a0Z1PkHQN6qkKMspIP1"
        "rBg=:df43wKy4K6gEzs2Ydg2T9Hq6SvVBoXlqJ59txiNPMFw=",
        "SCRAM-SHA-256$:fLy1hBVpXZEvn+LLSMvfzw==$5sZH5bKeiir8Ha6mvL894a0Z1PkHQN6qkKMspIP1rBg=:"
        "df43wKy4K6gEzs2Ydg2T9Hq6SvVBoXlqJ59txiNPMFw=",
        "SCRAM-SHA-256$4096:$5sZH5bKeiir8Ha6mvL894a0Z1PkHQN6qkKMspIP1rBg=:"  // empty salt
        "df43wKy4K6gEzs2Ydg2T9Hq6SvVBoXlqJ59txiNPMFw=",
        "SCRAM-SHA-256$4096:fLy1hBVpXZEvn+LLSMvfzw=$5sZH5bKeiir8Ha6mvL894a0Z1PkHQN6qkKMspIP1rBg=:"
        "df43wKy4K6gEzs2Ydg2T9Hq6SvVBoXlqJ59txiNPMFw=",  // truncated salt
        "SCRAM-SHA-256$4096:fLy1hBVpXZEvn+LLSMvfzw==$5sZH5bKeiir8Ha6mvL894a0Z1PkHQN6qkKMspIP1rB=:"
        "df43wKy4K6gEzs2Ydg2T9Hq6SvVBoXlqJ59txiNPMFw=",  // StoredKey 31 bytes
        "SCRAM-SHA-256$4096:fLy1hBVpXZEvn+LLSMvfzw==$5sZH5bKeiir8Ha6mvL894a0Z1PkHQN6qkKMspIP1rBg=:"
        "df43wKy4K6gEzs2Ydg2T9Hq6SvVBoXlqJ59txiNPMFwAAAA",  // ServerKey 35 bytes
        "SCRAM-SHA-256$4096:fLy1hBVpXZEvn+LLSMvfzw==$5sZH5bKeiir8Ha6mvL894a0Z1PkHQN6qkKMspIP1rBg=:"
        "df43wKy4K6gEzs2Ydg2T9Hq6SvVBoXlqJ59txiNPMFw=$",
        "SCRAM-SHA-256$4096:fLy1hBVpXZEvn+LLSMvfzw==$5sZH5bKeiir8Ha6mvL894a0Z1PkHQN6qkKMspIP1rBg=:"
        "df43wKy4K6gEzs2Ydg2T9Hq6SvVBoXlqJ59txiNPMFw=:",
        "SCRAM-SHA-256$4096:fLy1hBVpXZEvn+LLSMvfzw==:x$5sZH5bKeiir8Ha6mvL894a0Z1PkHQN6qkKMspIP1rBg"
        "=:df43wKy4K6gEzs2Ydg2T9Hq6SvVBoXlqJ59txiNPMFw=",
        good + " ",
        " " + good,
        good + '\0',
    };
    for (const auto& text : rejected) {
        CAPTURE(text);
        CHECK_FALSE(parse_scram_secret(text).has_value());
    }
}

TEST_CASE("scram: make_scram_secret refuses unusable parameters") {
    CHECK(make_scram_secret("pencil", "salt", 0).iterations == 0);
    CHECK(make_scram_secret("pencil", "salt", -5).iterations == 0);
    CHECK(make_scram_secret("pencil", "", 4096).iterations == 0);
    // Parameters it accepts round-trip through the text form.
    const ScramSecret one = make_scram_secret("", std::string(1, '\0'), 1);
    REQUIRE(one.iterations == 1);
    auto parsed = parse_scram_secret(format_scram_secret(one));
    REQUIRE(parsed.has_value());
    CHECK(parsed->salt == one.salt);
    CHECK(parsed->stored_key == one.stored_key);
    CHECK(parsed->server_key == one.server_key);
    CHECK(one.stored_key != make_scram_secret("", std::string(1, '\0'), 2).stored_key);
}
