#include "proxy/server/server_login.hpp"

#include <openssl/rand.h>

#include <algorithm>
#include <array>

#include "protocol/frontend_messages.hpp"
#include "protocol/md5_auth.hpp"
#include "protocol/message_types.hpp"
#include "proxy/server/scram_key_cache.hpp"

namespace pgtether {

using protocol::AuthRequest;

ServerLogin::ServerLogin(ServerCredentials credentials) : credentials_(std::move(credentials)) {}
ServerLogin::~ServerLogin() = default;

std::optional<std::string> ServerLogin::refused(AuthMethodBit method, const char* what) const {
    if (credentials_.require_auth.allows(method)) return std::nullopt;
    // libpq's words (fe-auth.c check_expected_areq), naming pgtether's key.
    return "authentication method requirement \"" + credentials_.require_auth.text +
           "\" (server_require_auth) failed: server " + what;
}

ServerLogin::Reply ServerLogin::on_authentication(const protocol::AuthenticationMessage& message) {
    Reply reply;
    auto fail = [&](std::string why) {
        reply.ok = false;
        reply.error = std::move(why);
        return reply;
    };
    switch (message.code) {
        case AuthRequest::Ok:
            if (scram_ && !scram_verified_) {
                // The server never proved it knows the secret (RFC 5802 §3: the client must
                // verify ServerSignature), so its Ok proves nothing either.
                return fail(
                    "server sent AuthenticationOk before completing the SCRAM exchange "
                    "(no valid server signature)");
            }
            if (credentials_.require_auth.authentication_required() && !answered_) {
                return fail("authentication method requirement \"" +
                            credentials_.require_auth.text +
                            "\" (server_require_auth) failed: server did not complete "
                            "authentication");
            }
            reply.authenticated = true;
            return reply;
        case AuthRequest::CleartextPassword:
            if (auto why = refused(AuthMethodBit::Password, "requested a cleartext password")) {
                return fail(*why);
            }
            if (scram_) return fail("server requested a cleartext password during SCRAM");
            if (!credentials_.password) {
                return fail("server requested a cleartext password, but no plain password is "
                            "configured for user \"" + credentials_.user + "\"");
            }
            protocol::append_password_message(reply.send, *credentials_.password);
            answered_ = true;
            return reply;
        case AuthRequest::Md5Password: {
            if (auto why = refused(AuthMethodBit::Md5, "requested a hashed password")) {
                return fail(*why);
            }
            if (scram_) return fail("server requested md5 authentication during SCRAM");
            const std::string* secret = credentials_.password ? &*credentials_.password
                                        : credentials_.md5_secret ? &*credentials_.md5_secret
                                                                  : nullptr;
            if (!secret) {
                return fail("wrong password type: server requested md5 authentication, but no "
                            "password or md5 secret is configured for user \"" +
                            credentials_.user + "\"");
            }
            std::array<std::uint8_t, 4> salt{};
            std::copy(message.data.begin(), message.data.end(), salt.begin());
            protocol::append_password_message(
                reply.send, protocol::md5_challenge_response(credentials_.user, *secret, salt));
            answered_ = true;
            return reply;
        }
        case AuthRequest::Sasl: {
            if (auto why = refused(AuthMethodBit::Scram, "requested SASL authentication")) {
                return fail(*why);
            }
            if (scram_) return fail("server restarted SASL authentication");
            auto mechanisms = protocol::parse_sasl_mechanisms(message.data);
            if (!mechanisms || std::find(mechanisms->begin(), mechanisms->end(),
                                         "SCRAM-SHA-256") == mechanisms->end()) {
                return fail("server requested a SASL mechanism pgtether does not support");
            }
            std::array<std::uint8_t, 18> nonce{};
            if (RAND_bytes(nonce.data(), static_cast<int>(nonce.size())) != 1) std::abort();
            std::string_view nonce_view(reinterpret_cast<const char*>(nonce.data()), nonce.size());
            if (credentials_.password) {
                scram_ = std::make_unique<protocol::ScramClient>(*credentials_.password, nonce_view);
                // The PBKDF2 runs once per password, salt and iteration count in this worker.
                scram_->set_key_deriver(
                    [](std::string_view password, std::string_view salt, int iterations) {
                        return this_threads_scram_key_cache().keys(password, salt, iterations);
                    });
            } else if (credentials_.scram_client_key && credentials_.scram_server_key) {
                scram_ = std::make_unique<protocol::ScramClient>(
                    *credentials_.scram_client_key, *credentials_.scram_server_key, nonce_view);
            } else {
                // PgBouncer's words first ("wrong password type"), which its users match.
                return fail("wrong password type: server requested SCRAM authentication, but no "
                            "plain password (or SCRAM keys from a client login) is available for "
                            "user \"" + credentials_.user + "\"");
            }
            protocol::append_sasl_initial_response(reply.send, "SCRAM-SHA-256",
                                                   scram_->client_first());
            return reply;
        }
        case AuthRequest::SaslContinue: {
            if (!scram_) return fail("unexpected SASL continue message from server");
            auto final_message = scram_->handle_server_first(protocol::as_chars(message.data));
            if (!final_message) return fail("invalid SCRAM server-first message from server");
            protocol::append_sasl_response(reply.send, *final_message);
            return reply;
        }
        case AuthRequest::SaslFinal:
            if (!scram_ || scram_verified_ ||
                !scram_->verify_server_final(protocol::as_chars(message.data))) {
                return fail("server's SCRAM signature is invalid");
            }
            scram_verified_ = true;
            answered_ = true;
            return reply;
        case AuthRequest::Gss:
        case AuthRequest::GssContinue:
            if (auto why = refused(AuthMethodBit::Gss, "requested GSSAPI authentication")) {
                return fail(*why);
            }
            break;
        case AuthRequest::Sspi:
            if (auto why = refused(AuthMethodBit::Sspi, "requested SSPI authentication")) {
                return fail(*why);
            }
            break;
        default:
            break;
    }
    return fail("server requested an authentication method pgtether does not support (" +
                std::to_string(static_cast<int>(message.code)) + ")");
}

ServerLogin::Step ServerLogin::on_message(char type, protocol::ByteSpan body) {
    namespace be = protocol::be;
    Step step;
    auto invalid = [&](std::string text) {
        step.kind = Step::Kind::Invalid;
        step.text = std::move(text);
        return step;
    };
    switch (type) {
        case be::kAuthentication: {
            auto message = protocol::parse_authentication(body);
            if (!message) return invalid("invalid authentication request from server");
            auto reply = on_authentication(*message);
            if (!reply.ok) {
                step.kind = Step::Kind::Refused;
                step.text = std::move(reply.error);
                return step;
            }
            step.send = std::move(reply.send);
            return step;
        }
        case be::kErrorResponse: {
            auto error = protocol::parse_error_fields(body);
            if (!error) return invalid("invalid error message from server");
            step.kind = Step::Kind::ServerError;
            step.error = std::move(*error);
            return step;
        }
        case be::kParameterStatus:
            if (auto status = protocol::parse_parameter_status(body)) {
                step.parameter.emplace(*status);
            }
            return step;
        case be::kBackendKeyData:
            step.backend_key = protocol::parse_backend_key_data(body);
            return step;
        case be::kReadyForQuery:
            step.kind = Step::Kind::Ready;
            return step;
        case be::kNoticeResponse:
        case be::kNegotiateProtocolVersion:
            return step;
        default:
            return invalid(std::string("unexpected message from server during login: '") + type +
                           "'");
    }
}

}  // namespace pgtether
