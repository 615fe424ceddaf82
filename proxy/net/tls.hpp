// TLS below the buffer layer (docs/tls-and-auth.md).
//
// TlsContext is an SSL_CTX built from the client_tls_* settings (pgtether accepting clients) or
// the server_tls_* settings (pgtether connecting to PostgreSQL). TlsSession is one connection's
// SSL object. It never touches a socket: a minimal memory BIO feeds it the ciphertext the Stream
// has just read (straight from the worker's receive buffer, no copy) and collects the ciphertext it
// produces in a buffer the caller names (the worker's staging buffer), which the Stream then writes
// to the socket like any other bytes. Framing, forwarding, pools and the tether only ever see
// plaintext and never know whether a connection is encrypted.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include <openssl/types.h>

#include "protocol/bytes.hpp"
#include "core/config.hpp"

namespace pgtether {

class TlsContext {
  public:
    enum class Side {
        AcceptClients,     // TLS server role: client_tls_*
        ConnectToServers,  // TLS client role: server_tls_*
    };

    // Builds the context from the configuration. Throws ConfigError naming the setting at fault
    // (unreadable key or certificate, key not matching the certificate, unknown protocol or
    // cipher names, ...). Only call it when the side's sslmode is not `disable`.
    TlsContext(const Config& config, Side side);
    ~TlsContext();
    TlsContext(const TlsContext&) = delete;
    TlsContext& operator=(const TlsContext&) = delete;

    [[nodiscard]] SSL_CTX* native() const { return ctx_; }
    [[nodiscard]] Side side() const { return side_; }
    [[nodiscard]] SslMode mode() const { return mode_; }

  private:
    SSL_CTX* ctx_ = nullptr;
    Side side_;
    SslMode mode_;
};

// The protocol versions of a *_tls_protocols value as an OpenSSL min/max pair plus the versions
// to disable in between; exposed for unit tests. nullopt (with `error`) for an invalid value.
struct TlsProtocolRange {
    int min_version = 0;
    int max_version = 0;
    long disable_options = 0;  // SSL_OP_NO_TLSv1_1 etc. for holes in the range
};
std::optional<TlsProtocolRange> parse_tls_protocols(std::string_view value, std::string& error);
// The OpenSSL cipher string for a *_tls_ciphers value (PgBouncer's shortcuts resolved).
std::string resolve_tls_ciphers(std::string_view value);

class TlsSession {
  public:
    enum class Status {
        Ok,         // progress was made
        WantInput,  // every byte of input is consumed; more ciphertext is needed
        Closed,     // the peer sent close_notify
        Failed,     // a TLS error; error() says which
    };

    // `server_host`: for the connecting side, the host name or address the server is expected to
    // have (SNI for names; checked against the certificate with verify-full). Ignored when
    // accepting.
    TlsSession(const TlsContext& context, const std::string& server_host);
    ~TlsSession();
    TlsSession(const TlsSession&) = delete;
    TlsSession& operator=(const TlsSession&) = delete;

    // The ciphertext the next OpenSSL calls read. The bytes must stay valid until they are
    // consumed or replaced; input_left() says how many are not consumed yet.
    void set_input(protocol::ByteSpan ciphertext) { input_ = ciphertext; }
    [[nodiscard]] std::size_t input_left() const { return input_.size(); }
    // Where ciphertext produced by the next OpenSSL calls is appended (nullptr: none expected).
    void set_output(std::string* ciphertext) { output_ = ciphertext; }

    // Drives the handshake with the input available. Ok once it has completed.
    Status handshake();
    [[nodiscard]] bool established() const { return established_; }
    // Decrypts into `out`; returns the status and how many bytes were written.
    std::pair<Status, std::size_t> read(std::span<std::uint8_t> out);
    // Whether read() could produce anything more: unread input, or a record (or plaintext of
    // one) OpenSSL holds. Asking anyway when not costs a call and, worse, makes OpenSSL allocate
    // its 16 KiB record buffer again and keep it while the connection idles.
    [[nodiscard]] bool readable() const;
    // Encrypts `plaintext` (all of it: the output buffer never refuses). False on a TLS error.
    [[nodiscard]] bool write(protocol::ByteSpan plaintext);
    // Sends close_notify.
    void shutdown();

    // Why the last call failed: OpenSSL's reasons, certificate verification problems first.
    [[nodiscard]] const std::string& error() const { return error_; }
    // The connection failed for a reason outside the TLS library (plaintext where the handshake
    // belongs): error() reports it from now on.
    void set_error(std::string why) { error_ = std::move(why); }

    // ---- the established session ----
    [[nodiscard]] const char* protocol_version() const;
    [[nodiscard]] const char* cipher() const;
    // "TLSv1.3/TLS_AES_256_GCM_SHA384/ECDH=X25519", PgBouncer's `tls` column of SHOW CLIENTS.
    [[nodiscard]] std::string connection_info() const;
    // The ALPN protocol both sides agreed on; empty if none.
    [[nodiscard]] std::string_view alpn() const;
    // The peer presented a certificate and it verified against the configured CA.
    [[nodiscard]] bool peer_certificate_verified() const;
    // The CommonName of the peer's certificate (nullopt when there is no certificate, no CN, or
    // a CN that contains a NUL byte and so cannot be a user name).
    [[nodiscard]] std::optional<std::string> peer_common_name() const;

  private:
    friend struct TlsBio;
    Status status_after(int rc);

    SSL* ssl_ = nullptr;
    protocol::ByteSpan input_;
    std::string* output_ = nullptr;
    std::string error_;
    bool established_ = false;
    bool connecting_ = false;
};

}  // namespace pgtether
