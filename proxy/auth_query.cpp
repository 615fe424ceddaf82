#include "proxy/auth_query.hpp"

#include <netdb.h>

#include <array>
#include <cstring>

#include <spdlog/spdlog.h>

#include "protocol/backend_messages.hpp"
#include "protocol/framing.hpp"
#include "protocol/frontend_messages.hpp"
#include "protocol/message_types.hpp"
#include "protocol/startup.hpp"
#include "proxy/auth_lookups.hpp"
#include "proxy/server_address.hpp"
#include "proxy/server_tls.hpp"
#include "proxy/tls.hpp"
#include "proxy/worker.hpp"

namespace pgtether {

namespace be = protocol::be;
using protocol::ByteSpan;
using protocol::Frame;
using protocol::FrameStatus;

AuthQuery* AuthQuery::create(Worker& worker, AuthLookups& owner, const Target& target) {
    return new AuthQuery(worker, owner, target);
}

void AuthQuery::begin() {
    connect();
}

AuthQuery::AuthQuery(Worker& worker, AuthLookups& owner, const Target& target)
    : worker_(worker),
      owner_(&owner),
      database_(target.database),
      credentials_(target.credentials),
      stream_(worker, *this),
      phase_since_ms_(worker.now_ms()) {}

void AuthQuery::enter(Phase phase) {
    phase_ = phase;
    phase_since_ms_ = worker_.now_ms();
}

void AuthQuery::close() {
    owner_ = nullptr;
    enter(Phase::Done);
    close_connection();
}

void AuthQuery::run(const std::string& user, const std::string& query) {
    user_ = user;
    rows_ = 0;
    secret_.reset();
    secret_column_missing_ = false;
    query_error_.clear();
    enter(Phase::Query);
    // The user name is a bound parameter: no quoting, no injection.
    std::string out;
    std::array<std::optional<std::string_view>, 1> params = {user_};
    protocol::append_parse(out, "", query);
    protocol::append_bind(out, "", "", params);
    protocol::append_execute(out, "", 0);
    protocol::append_sync(out);
    stream_.write(out);
}

// ---------------------------------------------------------------------------------------------
// Connecting (as Server::connect does: Unix socket, IP literal, or a name resolved now;
// proxy/server_address.hpp)

void AuthQuery::connect() {
    const auto& db = database_;
    // A host list: the lookup goes to the first host (the lookups are few and short).
    host_ = host_for_turn(db, 0);
    bool resolving = false;
    std::string error = start_side_connect(stream_, worker_.loop(), host_, db.port, worker_.config(),
                                           this, on_resolved, unix_socket_, resolving);
    if (resolving) ++pending_resolves_;
    if (!error.empty()) fail(error);
}

void AuthQuery::on_resolved(uv_getaddrinfo_t* req, int status, addrinfo* res) {
    auto* self = static_cast<AuthQuery*>(req->data);
    delete req;
    --self->pending_resolves_;
    if (self->phase_ == Phase::Done) {
        uv_freeaddrinfo(res);
        self->maybe_delete();
        return;
    }
    if (status != 0 || res == nullptr) {
        uv_freeaddrinfo(res);
        self->fail("cannot resolve " + self->host_ + ": " +
                   uv_strerror(status != 0 ? status : UV_EAI_NONAME));
        return;
    }
    if (auto error = connect_side_tcp(self->stream_, res->ai_addr); !error.empty()) {
        self->fail(error);
    }
    uv_freeaddrinfo(res);
}

void AuthQuery::on_stream_connected(int status) {
    if (phase_ == Phase::Done) return;
    if (status != 0) {
        fail(std::string("cannot connect: ") + uv_strerror(status));
        return;
    }
    stream_.start_reading();
    tls_context_ = server_tls::context_for(worker_.security(), unix_socket_);
    if (tls_context_) {
        enter(Phase::TlsAnswer);
        stream_.write(protocol::build_ssl_request());
        return;
    }
    send_startup();
}

void AuthQuery::on_stream_tls_ready(const std::string& error) {
    if (phase_ == Phase::Done) return;
    if (!error.empty()) {
        fail("TLS handshake failed: " + error);
        return;
    }
    send_startup();
}

void AuthQuery::send_startup() {
    enter(Phase::Login);
    // Only what pgtether decides; nothing of the client's (CVE-2025-12819).
    std::vector<std::pair<std::string, std::string>> params = {
        {"user", credentials_.user},
        {"database", database_.dbname.empty() ? database_.name : database_.dbname},
        {"application_name", "pgtether auth_query"},
    };
    login_ = std::make_unique<ServerLogin>(credentials_);
    stream_.write(protocol::build_startup_message(params));
}

// ---------------------------------------------------------------------------------------------
// Reading

std::size_t AuthQuery::on_stream_data(ByteSpan data) {
    switch (phase_) {
        case Phase::TlsAnswer: {
            auto answer =
                server_tls::handle_answer(data, stream_, *tls_context_, host_);
            switch (answer.kind) {
                case server_tls::Answer::Kind::NeedMore:
                    return 0;
                case server_tls::Answer::Kind::Failed:
                    fail("TLS negotiation failed: " + answer.error);
                    return data.size();
                case server_tls::Answer::Kind::Plaintext:
                    send_startup();
                    return answer.consumed;
                case server_tls::Answer::Kind::Tls:
                    enter(Phase::Handshake);
                    return answer.consumed;
            }
            return data.size();
        }
        case Phase::Login: {
            std::size_t n = handle_login(data);
            if ((phase_ == Phase::Query || phase_ == Phase::Ready) && n < data.size()) {
                n += handle_query(data.subspan(n));
            }
            return n;
        }
        case Phase::Query:
        case Phase::Ready:
            return handle_query(data);
        case Phase::Connecting:
        case Phase::Handshake:
        case Phase::Done:
            return data.size();
    }
    return data.size();
}

std::size_t AuthQuery::handle_login(ByteSpan data) {
    std::size_t consumed = 0;
    while (consumed < data.size() && phase_ == Phase::Login) {
        Frame frame = protocol::frame_message(data.subspan(consumed), kMaxMessage);
        if (frame.status == FrameStatus::Invalid) {
            fail("invalid message from server during login");
            return data.size();
        }
        if (frame.status == FrameStatus::NeedMore) break;
        ByteSpan body = data.subspan(consumed + protocol::kTypedHeaderSize,
                                     frame.total - protocol::kTypedHeaderSize);
        consumed += frame.total;
        switch (frame.type) {
            case be::kAuthentication: {
                auto message = protocol::parse_authentication(body);
                if (!message) {
                    fail("invalid authentication request from server");
                    return data.size();
                }
                auto reply = login_->on_authentication(*message);
                if (!reply.ok) {
                    fail("login as auth_user \"" + credentials_.user + "\" failed: " + reply.error);
                    return data.size();
                }
                if (!reply.send.empty()) stream_.write(reply.send);
                break;
            }
            case be::kErrorResponse: {
                auto error = protocol::parse_error_fields(body);
                fail("login as auth_user \"" + credentials_.user +
                     "\" failed: " + (error ? error->message : std::string("invalid error")));
                return data.size();
            }
            case be::kReadyForQuery: {
                login_.reset();
                logged_in_ = true;
                enter(Phase::Ready);
                if (owner_) owner_->on_connection_ready(*this);
                return consumed;
            }
            case be::kParameterStatus:
            case be::kBackendKeyData:
            case be::kNoticeResponse:
            case be::kNegotiateProtocolVersion:
                break;
            default:
                fail(std::string("unexpected message from server during login: '") + frame.type +
                     "'");
                return data.size();
        }
    }
    return consumed;
}

std::size_t AuthQuery::handle_query(ByteSpan data) {
    std::size_t consumed = 0;
    while (consumed < data.size() && (phase_ == Phase::Query || phase_ == Phase::Ready)) {
        Frame frame = protocol::frame_message(data.subspan(consumed), kMaxMessage);
        if (frame.status == FrameStatus::Invalid) {
            fail("invalid message from server");
            return data.size();
        }
        if (frame.status == FrameStatus::NeedMore) break;
        ByteSpan body = data.subspan(consumed + protocol::kTypedHeaderSize,
                                     frame.total - protocol::kTypedHeaderSize);
        consumed += frame.total;
        if (phase_ == Phase::Ready && frame.type != be::kParameterStatus &&
            frame.type != be::kNoticeResponse) {
            // Between lookups a server only reports; anything else (a FATAL from an
            // administrator's pg_terminate_backend, a stray reply) means the connection is not
            // what it should be.
            fail(std::string("unexpected message from server between lookups: '") + frame.type +
                 "'");
            return data.size();
        }
        switch (frame.type) {
            case be::kDataRow: {
                if (++rows_ > 1) break;
                auto values = protocol::parse_data_row(body);
                if (!values) {
                    fail("invalid DataRow from server");
                    return data.size();
                }
                if (values->size() < 2) {
                    secret_column_missing_ = true;
                } else if ((*values)[1]) {
                    secret_ = std::string(*(*values)[1]);
                }
                break;
            }
            case be::kErrorResponse:
                if (query_error_.empty()) {
                    auto error = protocol::parse_error_fields(body);
                    query_error_ = error ? error->sqlstate + ": " + error->message
                                         : std::string("invalid error message");
                }
                break;
            case be::kReadyForQuery: {
                Result result;
                if (!query_error_.empty()) {
                    result.error = "auth_query failed: " + query_error_;
                } else if (rows_ > 1) {
                    result.error = "auth_query returned more than one row";
                } else if (secret_column_missing_) {
                    result.error = "auth_query must return two columns: user name and secret";
                } else if (rows_ == 0) {
                    result.outcome = Result::Outcome::NotFound;
                } else if (!secret_ || secret_->empty()) {
                    result.outcome = Result::Outcome::NoPassword;
                } else {
                    result.outcome = Result::Outcome::Found;
                    UserSecret secret;
                    secret.user = user_;
                    secret.secret = *secret_;
                    secret.kind = classify_secret(secret.secret);
                    result.secret = std::move(secret);
                }
                secret_.reset();
                // Reusable only when the query left nothing behind: a custom auth_query that
                // opened a transaction (or failed inside one) does not return to the pool.
                auto status = protocol::parse_ready_for_query(body);
                const bool clean = status && *status == protocol::kTxIdle;
                enter(clean ? Phase::Ready : Phase::Done);
                if (owner_) owner_->on_lookup_done(*this, std::move(result));
                if (!clean) {
                    if (owner_) owner_->on_connection_retired(*this);
                    owner_ = nullptr;
                    close_connection();
                    return data.size();
                }
                if (owner_) owner_->on_connection_ready(*this);
                break;
            }
            case be::kParseComplete:
            case be::kBindComplete:
            case be::kRowDescription:
            case be::kNoData:
            case be::kCommandComplete:
            case be::kEmptyQueryResponse:
            case be::kNoticeResponse:
            case be::kParameterStatus:
                break;
            default:
                fail(std::string("unexpected message from server: '") + frame.type + "'");
                return data.size();
        }
    }
    return consumed;
}

// ---------------------------------------------------------------------------------------------
// Finishing

void AuthQuery::fail(const std::string& why) {
    if (phase_ == Phase::Done) return;
    const bool running = phase_ == Phase::Query;
    enter(Phase::Done);
    AuthLookups* owner = owner_;
    owner_ = nullptr;
    if (owner) {
        if (running) {
            Result result;
            result.outcome = Result::Outcome::Failed;
            result.error = why;
            owner->on_lookup_done(*this, std::move(result));
        }
        owner->on_connection_lost(*this, why);
    }
    close_connection();
}

void AuthQuery::close_connection() {
    if (stream_closed_ || stream_.closing()) {
        maybe_delete();
        return;
    }
    if (logged_in_) {
        std::string terminate;
        protocol::append_terminate(terminate);
        stream_.write(terminate);
    }
    stream_.close();
}

void AuthQuery::on_stream_end(int status) {
    std::string why = status == UV_EOF ? "server closed the connection"
                                       : std::string("connection failed: ") + uv_strerror(status);
    if (!stream_.tls_error().empty()) why += " (TLS: " + stream_.tls_error() + ")";
    fail(why);
}

void AuthQuery::on_stream_closed() {
    stream_closed_ = true;
    maybe_delete();
}

void AuthQuery::maybe_delete() {
    if (stream_closed_ && pending_resolves_ == 0) delete this;
}

}  // namespace pgtether
