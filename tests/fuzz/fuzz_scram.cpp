// libFuzzer target for the SCRAM-SHA-256 parsers and state machines (protocol/scram.hpp) and the
// base64 decoder they rely on.
//
// Input layout: up to two messages separated by the first NUL byte (SCRAM messages never contain
// NUL, so the split is unambiguous); without a NUL, both messages are the whole input.
//   1. A fresh ScramServer takes the first message as client-first-message and, if it continues,
//      the second as client-final-message.
//   2. A ScramServer that has already accepted RFC 7677's client-first-message takes the first
//      message as client-final-message, so proofs reach verification without the fuzzer having to
//      guess the server nonce.
//   3. A ScramClient takes the first message as server-first-message and the second as
//      server-final-message. It is the key-based client: it runs no PBKDF2, so inputs with huge
//      (but allowed) iteration counts stay fast; the parser is shared with the password client.
//   4. The whole input goes through parse_scram_secret and base64_decode.
// Invariants that must hold for every input abort the run (__builtin_trap) when broken.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "protocol/base64.hpp"
#include "protocol/scram.hpp"

namespace {

using namespace pgtether::protocol;

// RFC 7677 section 3: user "user", password "pencil".
constexpr std::string_view kSalt = "W22ZaJ0SNY7soEsUEjb6gQ==";
constexpr std::string_view kClientNonce = "rOprNGfwEbeRWgbNEkqO";
constexpr std::string_view kServerNonce = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0";
constexpr std::string_view kClientFirst = "n,,n=user,r=rOprNGfwEbeRWgbNEkqO";
constexpr std::string_view kClientFinal =
    "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
    "p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=";

void check(bool condition) {
    if (!condition) __builtin_trap();
}

struct Fixture {
    ScramSecret secret;
    ScramKey client_key{};
    std::string client_nonce_raw;
};

// Computed once: PBKDF2 with 4096 iterations per input would dominate the run.
const Fixture& fixture() {
    static const Fixture f = [] {
        Fixture out;
        out.secret = make_scram_secret("pencil", base64_decode(kSalt).value_or(""), 4096);
        out.client_nonce_raw = base64_decode(kClientNonce).value_or("");
        ScramServer server = ScramServer::with_printable_nonce(out.secret, kServerNonce);
        check(server.client_first(kClientFirst).status == ScramServer::Status::Continue);
        check(server.client_final(kClientFinal).status == ScramServer::Status::Done);
        check(server.client_key().has_value());
        out.client_key = *server.client_key();
        return out;
    }();
    return f;
}

void check_step(const ScramServer& server, const ScramServer::Step& step) {
    if (step.status != ScramServer::Status::Failed) check(!step.protocol_violation);
    check(server.client_key().has_value() == (step.status == ScramServer::Status::Done));
    if (step.status == ScramServer::Status::Done) check(step.message.starts_with("v="));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const Fixture& f = fixture();
    const std::string_view input(reinterpret_cast<const char*>(data), size);
    const std::size_t nul = input.find('\0');
    const std::string_view first = nul == std::string_view::npos ? input : input.substr(0, nul);
    const std::string_view second = nul == std::string_view::npos ? input : input.substr(nul + 1);

    {
        ScramServer server = ScramServer::with_printable_nonce(f.secret, kServerNonce);
        auto step = server.client_first(first);
        check_step(server, step);
        if (step.status == ScramServer::Status::Continue) {
            check(step.message.starts_with("r="));
            check_step(server, server.client_final(second));
        }
    }
    {
        ScramServer server = ScramServer::with_printable_nonce(f.secret, kServerNonce);
        check(server.client_first(kClientFirst).status == ScramServer::Status::Continue);
        auto step = server.client_final(first);
        check_step(server, step);
        // Only the RFC's own proof can succeed against this exchange.
        if (step.status == ScramServer::Status::Done) check(*server.client_key() == f.client_key);
    }
    {
        ScramClient client(f.client_key, f.secret.server_key, f.client_nonce_raw, "user");
        auto client_final = client.handle_server_first(first);
        if (client_final) {
            check(client_final->starts_with("c=biws,r=rOprNGfwEbeRWgbNEkqO"));
            (void)client.verify_server_final(second);
        } else {
            check(!client.verify_server_final(second));
        }
        (void)ScramClient::server_error(second);
    }
    if (auto secret = parse_scram_secret(input)) {
        // The strict parser accepts only the canonical text form.
        check(secret->iterations >= 1 && !secret->salt.empty());
        check(format_scram_secret(*secret) == input);
    }
    if (auto raw = base64_decode(input)) check(base64_encode(*raw) == input);
    return 0;
}
