#include "proxy/net/tls.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <unistd.h>

#include <openssl/bio.h>
#include <openssl/core_names.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <vector>

#include "protocol/ascii.hpp"

namespace pgtether {

namespace {

// ALPN protocol of PostgreSQL 17+ (protocol §55.2.10): length-prefixed wire form.
constexpr unsigned char kAlpnWire[] = {10, 'p', 'o', 's', 't', 'g', 'r', 'e', 's', 'q', 'l'};
constexpr std::string_view kAlpnName = "postgresql";

using protocol::ascii_iequals;

// OpenSSL's reasons for the failure on top of this thread's error queue, oldest first, then
// cleared. Reasons are what an operator can act on ("certificate verify failed"), without the
// library/function noise of ERR_error_string.
std::string drain_openssl_errors() {
    std::string out;
    while (unsigned long code = ERR_get_error()) {
        const char* reason = ERR_reason_error_string(code);
        std::string text = reason ? reason : "error " + std::to_string(code);
        // OpenSSL 3 reports a failed fopen() as a "system library" error carrying errno, which
        // it prints as "error 2147483661": say what the system said.
        if (ERR_SYSTEM_ERROR(code)) text = std::strerror(ERR_GET_REASON(code));
        if (out.find(text) != std::string::npos) continue;
        if (!out.empty()) out += ": ";
        out += text;
    }
    return out;
}

std::string key_prefix(TlsContext::Side side) {
    return side == TlsContext::Side::AcceptClients ? "client_tls" : "server_tls";
}

// Protocol bits, lowest version first.
constexpr std::array<int, 4> kVersions = {TLS1_VERSION, TLS1_1_VERSION, TLS1_2_VERSION,
                                          TLS1_3_VERSION};
constexpr std::array<long, 4> kNoVersion = {SSL_OP_NO_TLSv1, SSL_OP_NO_TLSv1_1, SSL_OP_NO_TLSv1_2,
                                            SSL_OP_NO_TLSv1_3};
constexpr unsigned kAllVersions = 0xf;
constexpr unsigned kSecureVersions = 0xc;  // TLS 1.2 and 1.3

int alpn_select(SSL* /*ssl*/, const unsigned char** out, unsigned char* outlen,
                const unsigned char* in, unsigned int inlen, void* /*arg*/) {
    // A client that offers ALPN must offer "postgresql" (PostgreSQL 17 refuses the connection
    // otherwise); a client that offers none is fine here, and a direct-TLS client is checked by
    // the caller after the handshake.
    unsigned char* selected = nullptr;
    if (SSL_select_next_proto(&selected, outlen, kAlpnWire, sizeof kAlpnWire, in, inlen) ==
            OPENSSL_NPN_NEGOTIATED &&
        std::string_view(reinterpret_cast<const char*>(selected), *outlen) == kAlpnName) {
        *out = selected;
        return SSL_TLSEXT_ERR_OK;
    }
    return SSL_TLSEXT_ERR_ALERT_FATAL;
}

// With an optional client certificate the handshake must not fail on it ("not validated", as
// PgBouncer says for allow/prefer/require); OpenSSL still records the verification result, which
// cert authentication then insists on.
int accept_any_certificate(int /*preverify_ok*/, X509_STORE_CTX* /*ctx*/) {
    return 1;
}

// DHE parameters for client_tls_dheparams = legacy: a 1024-bit group (OpenSSL's security level
// may refuse it, which is then reported as a configuration error).
EVP_PKEY* legacy_dh_parameters() {
    EVP_PKEY_CTX* pctx = EVP_PKEY_CTX_new_from_name(nullptr, "DH", nullptr);
    if (!pctx) return nullptr;
    EVP_PKEY* params = nullptr;
    char group[] = "dh_1024_160";
    OSSL_PARAM p[] = {OSSL_PARAM_construct_utf8_string(OSSL_PKEY_PARAM_GROUP_NAME, group, 0),
                      OSSL_PARAM_construct_end()};
    if (EVP_PKEY_paramgen_init(pctx) != 1 || EVP_PKEY_CTX_set_params(pctx, p) != 1 ||
        EVP_PKEY_paramgen(pctx, &params) != 1) {
        params = nullptr;
    }
    EVP_PKEY_CTX_free(pctx);
    return params;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Settings

std::optional<TlsProtocolRange> parse_tls_protocols(std::string_view value, std::string& error) {
    // libtls's tls_config_parse_protocols, which PgBouncer uses: names separated by ',' or ':',
    // '!' or '-' in front removes versions; a list that starts by removing starts from "all".
    unsigned bits = 0;
    std::size_t pos = 0;
    bool any = false;
    while (pos <= value.size()) {
        std::size_t end = value.find_first_of(",:", pos);
        if (end == std::string_view::npos) end = value.size();
        std::string_view item = value.substr(pos, end - pos);
        pos = end + 1;
        while (!item.empty() && (item.front() == ' ' || item.front() == '\t'))
            item.remove_prefix(1);
        while (!item.empty() && (item.back() == ' ' || item.back() == '\t'))
            item.remove_suffix(1);
        if (item.empty()) {
            if (end == value.size()) break;
            continue;
        }
        bool negate = item.front() == '!' || item.front() == '-';
        if (negate) {
            item.remove_prefix(1);
            if (!any) bits = kAllVersions;
        }
        unsigned these = 0;
        if (ascii_iequals(item, "all") || ascii_iequals(item, "legacy")) {
            these = kAllVersions;
        } else if (ascii_iequals(item, "secure") || ascii_iequals(item, "default")) {
            these = kSecureVersions;
        } else if (ascii_iequals(item, "tlsv1")) {
            these = kAllVersions;
        } else if (ascii_iequals(item, "tlsv1.0")) {
            these = 0x1;
        } else if (ascii_iequals(item, "tlsv1.1")) {
            these = 0x2;
        } else if (ascii_iequals(item, "tlsv1.2")) {
            these = 0x4;
        } else if (ascii_iequals(item, "tlsv1.3")) {
            these = 0x8;
        } else {
            error = "unknown TLS protocol \"" + std::string(item) +
                    "\" (expected tlsv1.0, tlsv1.1, tlsv1.2, tlsv1.3, all, secure or legacy)";
            return std::nullopt;
        }
        bits = negate ? bits & ~these : bits | these;
        any = true;
    }
    if (bits == 0) {
        error = "no TLS protocol version is left enabled";
        return std::nullopt;
    }
    TlsProtocolRange range;
    int low = -1;
    int high = -1;
    for (int i = 0; i < 4; ++i) {
        if (bits & (1u << i)) {
            if (low < 0) low = i;
            high = i;
        }
    }
    range.min_version = kVersions[static_cast<std::size_t>(low)];
    range.max_version = kVersions[static_cast<std::size_t>(high)];
    for (int i = low; i <= high; ++i) {
        if (!(bits & (1u << i))) range.disable_options |= kNoVersion[static_cast<std::size_t>(i)];
    }
    return range;
}

std::string resolve_tls_ciphers(std::string_view value) {
    // libtls's shortcuts (tls_config_set_ciphers), which PgBouncer documents.
    if (ascii_iequals(value, "default") || ascii_iequals(value, "secure")) {
        return "HIGH+EECDH:HIGH+EDH:!SSLv3:!SHA384:!SHA256:!DSS:!aNULL";
    }
    if (ascii_iequals(value, "compat") || ascii_iequals(value, "legacy")) return "HIGH:+3DES:!aNULL";
    if (ascii_iequals(value, "insecure") || ascii_iequals(value, "all")) return "ALL:!aNULL:!eNULL";
    if (ascii_iequals(value, "normal")) {
        return "HIGH+EECDH:HIGH+EDH:HIGH+RSA:+SHA384:+SHA256:+SSLv3:+EDH:+RSA:-3DES:3DES+RSA:"
               "!CAMELLIA:!DSS:!aNULL";
    }
    if (ascii_iequals(value, "fast")) {
        return "HIGH+EECDH:HIGH+EDH:HIGH+RSA:+AES256:+SHA256:+SHA384:+SSLv3:+EDH:+RSA:-3DES:"
               "3DES+RSA:!CAMELLIA:!DSS:!aNULL";
    }
    return std::string(value);
}

// ---------------------------------------------------------------------------------------------
// TlsContext

TlsContext::TlsContext(const Config& config, Side side) : side_(side) {
    const bool accept = side == Side::AcceptClients;
    const std::string prefix = key_prefix(side);
    mode_ = accept ? config.client_tls_sslmode : config.server_tls_sslmode;
    const std::string& key_file = accept ? config.client_tls_key_file : config.server_tls_key_file;
    const std::string& cert_file =
        accept ? config.client_tls_cert_file : config.server_tls_cert_file;
    const std::string& ca_file = accept ? config.client_tls_ca_file : config.server_tls_ca_file;
    const std::string& protocols =
        accept ? config.client_tls_protocols : config.server_tls_protocols;
    const std::string& ciphers = accept ? config.client_tls_ciphers : config.server_tls_ciphers;
    const std::string& tls13_ciphers =
        accept ? config.client_tls13_ciphers : config.server_tls13_ciphers;

    auto fail = [&](const std::string& key, const std::string& message) {
        std::string detail = drain_openssl_errors();
        throw ConfigError(config.config_file, 0, key,
                          detail.empty() ? message : message + ": " + detail);
    };

    ERR_clear_error();
    ctx_ = SSL_CTX_new(accept ? TLS_server_method() : TLS_client_method());
    if (!ctx_) fail(prefix + "_sslmode", "cannot create a TLS context");
    // From here on the destructor does not run if we throw: free the context on the way out.
    struct Guard {
        SSL_CTX*& ctx;
        bool armed = true;
        ~Guard() {
            if (armed) {
                SSL_CTX_free(ctx);
                ctx = nullptr;
            }
        }
    } guard{ctx_};

    // No renegotiation (a classic source of bugs and attacks), no compression (CRIME), no session
    // resumption (PostgreSQL does not offer it either; it would only keep key material around).
    SSL_CTX_set_options(ctx_, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_TICKET);
    SSL_CTX_set_session_cache_mode(ctx_, SSL_SESS_CACHE_OFF);
    // Idle connections give their record buffers back: thousands of idle TLS clients should cost
    // little more than thousands of plaintext ones.
    SSL_CTX_set_mode(ctx_, SSL_MODE_RELEASE_BUFFERS);

    std::string error;
    auto range = parse_tls_protocols(protocols, error);
    if (!range) fail(prefix + "_protocols", "invalid value \"" + protocols + "\": " + error);
    SSL_CTX_set_options(ctx_, static_cast<std::uint64_t>(range->disable_options));
    if (SSL_CTX_set_min_proto_version(ctx_, range->min_version) != 1 ||
        SSL_CTX_set_max_proto_version(ctx_, range->max_version) != 1) {
        fail(prefix + "_protocols", "cannot restrict TLS versions to \"" + protocols + "\"");
    }
    if (!ciphers.empty()) {
        std::string list = resolve_tls_ciphers(ciphers);
        if (SSL_CTX_set_cipher_list(ctx_, list.c_str()) != 1) {
            fail(prefix + "_ciphers", "no usable cipher in \"" + ciphers + "\"");
        }
    }
    if (!tls13_ciphers.empty() && SSL_CTX_set_ciphersuites(ctx_, tls13_ciphers.c_str()) != 1) {
        fail(accept ? "client_tls13_ciphers" : "server_tls13_ciphers",
             "no usable TLS 1.3 cipher suite in \"" + tls13_ciphers + "\"");
    }

    if (key_file.empty() != cert_file.empty()) {
        fail(prefix + (key_file.empty() ? "_key_file" : "_cert_file"),
             prefix + "_key_file and " + prefix + "_cert_file must be set together");
    }
    if (accept && key_file.empty()) {
        fail("client_tls_key_file", "client_tls_sslmode = " + std::string(to_string(mode_)) +
                                        " needs client_tls_key_file and client_tls_cert_file");
    }
    // A file that cannot be opened is named with the system's reason ("Permission denied", "No
    // such file or directory") rather than OpenSSL's.
    auto check_readable = [&](const std::string& key, const char* what, const std::string& path) {
        int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
            ERR_clear_error();
            std::string reason = std::strerror(errno);
            throw ConfigError(config.config_file, 0, key,
                              std::string("cannot read ") + what + " \"" + path + "\": " + reason);
        }
        ::close(fd);
    };
    if (!cert_file.empty()) {
        check_readable(prefix + "_cert_file", "certificate", cert_file);
        check_readable(prefix + "_key_file", "private key", key_file);
        if (SSL_CTX_use_certificate_chain_file(ctx_, cert_file.c_str()) != 1) {
            fail(prefix + "_cert_file", "cannot load certificate \"" + cert_file + "\"");
        }
        if (SSL_CTX_use_PrivateKey_file(ctx_, key_file.c_str(), SSL_FILETYPE_PEM) != 1) {
            fail(prefix + "_key_file", "cannot load private key \"" + key_file + "\"");
        }
        if (SSL_CTX_check_private_key(ctx_) != 1) {
            fail(prefix + "_key_file", "private key \"" + key_file +
                                           "\" does not match certificate \"" + cert_file + "\"");
        }
    }

    const bool verify = mode_ == SslMode::VerifyCa || mode_ == SslMode::VerifyFull;
    if (!ca_file.empty()) {
        check_readable(prefix + "_ca_file", "CA certificates", ca_file);
        if (SSL_CTX_load_verify_locations(ctx_, ca_file.c_str(), nullptr) != 1) {
            fail(prefix + "_ca_file", "cannot load CA certificates \"" + ca_file + "\"");
        }
    } else if (verify) {
        if (accept && mode_ == SslMode::VerifyFull) {
            fail("client_tls_ca_file", "client_tls_sslmode = verify-full needs client_tls_ca_file");
        }
        // PgBouncer (libtls) falls back to the system's trusted CAs; so do we.
        if (SSL_CTX_set_default_verify_paths(ctx_) != 1) {
            fail(prefix + "_ca_file", "cannot load the system's trusted CA certificates");
        }
    }

    if (accept) {
        SSL_CTX_set_num_tickets(ctx_, 0);
        static const unsigned char kSessionContext[] = "pgtether";
        SSL_CTX_set_session_id_context(ctx_, kSessionContext, sizeof kSessionContext - 1);
        SSL_CTX_set_alpn_select_cb(ctx_, alpn_select, nullptr);
        if (verify) {
            SSL_CTX_set_verify(ctx_, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
        } else if (!ca_file.empty()) {
            SSL_CTX_set_verify(ctx_, SSL_VERIFY_PEER, accept_any_certificate);
        } else {
            SSL_CTX_set_verify(ctx_, SSL_VERIFY_NONE, nullptr);
        }
        if (!ca_file.empty()) {
            // Tell clients which CAs we accept (certificate_authorities).
            if (STACK_OF(X509_NAME)* names = SSL_load_client_CA_file(ca_file.c_str())) {
                SSL_CTX_set_client_CA_list(ctx_, names);
            }
        }
        const std::string& dh = config.client_tls_dheparams;
        if (ascii_iequals(dh, "auto")) {
            SSL_CTX_set_dh_auto(ctx_, 1);
        } else if (ascii_iequals(dh, "legacy")) {
            EVP_PKEY* params = legacy_dh_parameters();
            if (!params || SSL_CTX_set0_tmp_dh_pkey(ctx_, params) != 1) {
                EVP_PKEY_free(params);
                fail("client_tls_dheparams", "cannot use 1024-bit DH parameters");
            }
        } else if (!ascii_iequals(dh, "none")) {
            fail("client_tls_dheparams",
                 "invalid value \"" + dh + "\" (expected none, auto or legacy)");
        }
        const std::string& curve = config.client_tls_ecdhcurve;
        if (ascii_iequals(curve, "none")) {
            // No elliptic curves: key exchange only through finite-field DH groups.
            if (SSL_CTX_set1_groups_list(ctx_, "ffdhe2048:ffdhe3072:ffdhe4096") != 1) {
                fail("client_tls_ecdhcurve", "cannot disable ECDH");
            }
        } else if (!ascii_iequals(curve, "auto") && !curve.empty()) {
            if (SSL_CTX_set1_groups_list(ctx_, curve.c_str()) != 1) {
                fail("client_tls_ecdhcurve", "unknown curve \"" + curve + "\"");
            }
        }
    } else {
        SSL_CTX_set_verify(ctx_, verify ? SSL_VERIFY_PEER : SSL_VERIFY_NONE, nullptr);
        // Offer ALPN "postgresql" as libpq 17 does; older servers ignore it.
        if (SSL_CTX_set_alpn_protos(ctx_, kAlpnWire, sizeof kAlpnWire) != 0) {
            fail("server_tls_sslmode", "cannot set ALPN");
        }
    }
    guard.armed = false;
}

TlsContext::~TlsContext() {
    SSL_CTX_free(ctx_);
}

// ---------------------------------------------------------------------------------------------
// The memory BIO: reads come from TlsSession::input_, writes go to *TlsSession::output_.

struct TlsBio {
    static TlsSession* session(BIO* bio) { return static_cast<TlsSession*>(BIO_get_data(bio)); }

    static int write(BIO* bio, const char* data, std::size_t len, std::size_t* written) {
        TlsSession* s = session(bio);
        BIO_clear_retry_flags(bio);
        if (!s || !s->output_) return 0;  // a write nobody collects would be lost: fail loudly
        s->output_->append(data, len);
        *written = len;
        return 1;
    }

    static int read(BIO* bio, char* out, std::size_t len, std::size_t* read_bytes) {
        TlsSession* s = session(bio);
        BIO_clear_retry_flags(bio);
        if (!s || s->input_.empty()) {
            // Not end of stream, just nothing yet: OpenSSL reports SSL_ERROR_WANT_READ.
            BIO_set_retry_read(bio);
            *read_bytes = 0;
            return 0;
        }
        std::size_t n = std::min(len, s->input_.size());
        std::memcpy(out, s->input_.data(), n);
        s->input_ = s->input_.subspan(n);
        *read_bytes = n;
        return 1;
    }

    static long ctrl(BIO* bio, int cmd, long /*num*/, void* /*ptr*/) {
        switch (cmd) {
            case BIO_CTRL_FLUSH:
            case BIO_CTRL_DUP:
                return 1;
            case BIO_CTRL_PENDING: {
                TlsSession* s = session(bio);
                return s ? static_cast<long>(s->input_.size()) : 0;
            }
            default:
                return 0;
        }
    }

    static int create(BIO* bio) {
        BIO_set_init(bio, 1);
        return 1;
    }

    static const BIO_METHOD* method() {
        // Created once and never changed: safe to share between workers.
        static BIO_METHOD* m = [] {
            BIO_METHOD* meth =
                BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "pgtether memory");
            BIO_meth_set_write_ex(meth, write);
            BIO_meth_set_read_ex(meth, read);
            BIO_meth_set_ctrl(meth, ctrl);
            BIO_meth_set_create(meth, create);
            return meth;
        }();
        return m;
    }
};

// ---------------------------------------------------------------------------------------------
// TlsSession

TlsSession::TlsSession(const TlsContext& context, const std::string& server_host) {
    ssl_ = SSL_new(context.native());
    if (!ssl_) {
        error_ = "cannot create a TLS session: " + drain_openssl_errors();
        return;
    }
    BIO* bio = BIO_new(TlsBio::method());
    if (!bio) {
        error_ = "cannot create a TLS session: " + drain_openssl_errors();
        SSL_free(ssl_);
        ssl_ = nullptr;
        return;
    }
    BIO_set_data(bio, this);
    SSL_set_bio(ssl_, bio, bio);  // one reference, used for both directions
    connecting_ = context.side() == TlsContext::Side::ConnectToServers;
    if (!connecting_) {
        SSL_set_accept_state(ssl_);
        return;
    }
    SSL_set_connect_state(ssl_);
    if (server_host.empty()) return;
    in6_addr scratch{};
    bool is_address = inet_pton(AF_INET, server_host.c_str(), &scratch) == 1 ||
                      inet_pton(AF_INET6, server_host.c_str(), &scratch) == 1;
    if (!is_address) {
        // Server Name Indication: managed services route on it (libpq sends it too, sslsni=1).
        // (SSL_set_tlsext_host_name, without the macro's C cast.)
        SSL_ctrl(ssl_, SSL_CTRL_SET_TLSEXT_HOSTNAME, TLSEXT_NAMETYPE_host_name,
                 const_cast<char*>(server_host.c_str()));
    }
    if (context.mode() == SslMode::VerifyFull) {
        // RFC 6125 checks: subjectAltName DNS names (or IP addresses), the CommonName only when
        // there are none, as libpq does.
        X509_VERIFY_PARAM* param = SSL_get0_param(ssl_);
        if (is_address) {
            X509_VERIFY_PARAM_set1_ip_asc(param, server_host.c_str());
        } else {
            X509_VERIFY_PARAM_set_hostflags(param, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
            SSL_set1_host(ssl_, server_host.c_str());
        }
    }
}

TlsSession::~TlsSession() {
    SSL_free(ssl_);
}

TlsSession::Status TlsSession::status_after(int rc) {
    switch (SSL_get_error(ssl_, rc)) {
        case SSL_ERROR_WANT_READ:
            return Status::WantInput;
        case SSL_ERROR_ZERO_RETURN:
            return Status::Closed;
        default: {
            error_ = drain_openssl_errors();
            long verify = SSL_get_verify_result(ssl_);
            if (verify != X509_V_OK) {
                std::string reason = X509_verify_cert_error_string(verify);
                error_ = error_.empty() ? reason : error_ + " (" + reason + ")";
            }
            if (error_.empty()) error_ = "TLS protocol error";
            return Status::Failed;
        }
    }
}

TlsSession::Status TlsSession::handshake() {
    if (!ssl_) return Status::Failed;
    if (established_) return Status::Ok;
    ERR_clear_error();
    int rc = SSL_do_handshake(ssl_);
    if (rc == 1) {
        established_ = true;
        return Status::Ok;
    }
    return status_after(rc);
}

std::pair<TlsSession::Status, std::size_t> TlsSession::read(std::span<std::uint8_t> out) {
    if (!ssl_ || !established_) return {Status::Failed, 0};
    ERR_clear_error();
    std::size_t n = 0;
    if (SSL_read_ex(ssl_, out.data(), out.size(), &n) == 1) return {Status::Ok, n};
    return {status_after(0), 0};
}

bool TlsSession::readable() const {
    return ssl_ && (!input_.empty() || SSL_has_pending(ssl_) == 1);
}

bool TlsSession::write(protocol::ByteSpan plaintext) {
    if (!ssl_ || !established_) return false;
    if (plaintext.empty()) return true;
    ERR_clear_error();
    std::size_t n = 0;
    // Without SSL_MODE_ENABLE_PARTIAL_WRITE, success means everything was encrypted.
    if (SSL_write_ex(ssl_, plaintext.data(), plaintext.size(), &n) == 1) return true;
    status_after(0);
    return false;
}

void TlsSession::shutdown() {
    if (!ssl_ || !established_) return;
    ERR_clear_error();
    SSL_shutdown(ssl_);  // queues close_notify; we do not wait for the peer's
    ERR_clear_error();
}

const char* TlsSession::protocol_version() const {
    return ssl_ ? SSL_get_version(ssl_) : "none";
}

const char* TlsSession::cipher() const {
    const char* name = ssl_ ? SSL_get_cipher_name(ssl_) : nullptr;
    return name ? name : "none";
}

std::string TlsSession::connection_info() const {
    if (!ssl_ || !established_) return {};
    std::string out = std::string(protocol_version()) + "/" + cipher();
    int group = static_cast<int>(SSL_get_negotiated_group(ssl_));
    if (group != NID_undef) {
        const char* name = OBJ_nid2sn(group);
        if (name) out += std::string("/ECDH=") + name;
    }
    return out;
}

std::string_view TlsSession::alpn() const {
    if (!ssl_) return {};
    const unsigned char* data = nullptr;
    unsigned int len = 0;
    SSL_get0_alpn_selected(ssl_, &data, &len);
    return data ? std::string_view(reinterpret_cast<const char*>(data), len) : std::string_view();
}

bool TlsSession::peer_certificate_verified() const {
    return ssl_ && SSL_get0_peer_certificate(ssl_) != nullptr &&
           SSL_get_verify_result(ssl_) == X509_V_OK;
}

std::optional<std::string> TlsSession::peer_common_name() const {
    X509* cert = ssl_ ? SSL_get0_peer_certificate(ssl_) : nullptr;
    if (!cert) return std::nullopt;
    X509_NAME* subject = X509_get_subject_name(cert);
    int index = X509_NAME_get_index_by_NID(subject, NID_commonName, -1);
    if (index < 0) return std::nullopt;
    ASN1_STRING* value = X509_NAME_ENTRY_get_data(X509_NAME_get_entry(subject, index));
    unsigned char* utf8 = nullptr;
    int len = ASN1_STRING_to_UTF8(&utf8, value);
    if (len < 0) return std::nullopt;
    std::string name(reinterpret_cast<const char*>(utf8), static_cast<std::size_t>(len));
    OPENSSL_free(utf8);
    // A NUL inside the CN would let "admin\0.evil" pass for "admin" in C string comparisons.
    if (name.find('\0') != std::string::npos) return std::nullopt;
    return name;
}

}  // namespace pgtether
