#include "proxy/server_login.hpp"

#include <openssl/rand.h>

#include <algorithm>
#include <array>

#include "protocol/frontend_messages.hpp"
#include "protocol/md5_auth.hpp"

namespace pgtether {

using protocol::AuthRequest;

ServerLogin::ServerLogin(ServerCredentials credentials) : credentials_(std::move(credentials)) {}
ServerLogin::~ServerLogin() = default;

ServerLogin::Reply ServerLogin::on_authentication(const protocol::AuthenticationMessage& message) {
    Reply reply;
    auto fail = [&](std::string why) {
        reply.ok = false;
        reply.error = std::move(why);
        return reply;
    };
    switch (message.code) {
        case AuthRequest::Ok:
            reply.authenticated = true;
            return reply;
        case AuthRequest::CleartextPassword:
            if (!credentials_.password) {
                return fail("server requested a cleartext password, but no plain password is "
                            "configured for user \"" + credentials_.user + "\"");
            }
            protocol::append_password_message(reply.send, *credentials_.password);
            return reply;
        case AuthRequest::Md5Password: {
            const std::string* secret = credentials_.password ? &*credentials_.password
                                        : credentials_.md5_secret ? &*credentials_.md5_secret
                                                                  : nullptr;
            if (!secret) {
                return fail("server requested md5 authentication, but no password or md5 secret "
                            "is configured for user \"" + credentials_.user + "\"");
            }
            std::array<std::uint8_t, 4> salt{};
            std::copy(message.data.begin(), message.data.end(), salt.begin());
            protocol::append_password_message(
                reply.send, protocol::md5_challenge_response(credentials_.user, *secret, salt));
            return reply;
        }
        case AuthRequest::Sasl: {
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
            } else if (credentials_.scram_client_key && credentials_.scram_server_key) {
                scram_ = std::make_unique<protocol::ScramClient>(
                    *credentials_.scram_client_key, *credentials_.scram_server_key, nonce_view);
            } else {
                return fail("server requested SCRAM authentication, but no plain password (or "
                            "SCRAM keys from a client login) is available for user \"" +
                            credentials_.user + "\"");
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
            if (!scram_ || !scram_->verify_server_final(protocol::as_chars(message.data))) {
                return fail("server's SCRAM signature is invalid");
            }
            return reply;
        default:
            return fail("server requested an authentication method pgtether does not support (" +
                        std::to_string(static_cast<int>(message.code)) + ")");
    }
}

}  // namespace pgtether
