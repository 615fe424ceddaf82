// server_require_auth: which authentication requests pgtether answers when it logs in to a
// PostgreSQL server, with libpq's `require_auth` semantics (libpq's connection parameter of
// PostgreSQL 16; docs/tls-and-auth.md). Without it pgtether answers whatever the server asks
// for with whatever it has -- including a cleartext password to a server reached without TLS, or
// to whoever sits on the path after server_tls_sslmode = prefer fell back to plaintext.
//
// The value is a comma-separated list of methods: `password` (AuthenticationCleartextPassword),
// `md5`, `scram-sha-256` (SASL), `gss`, `sspi`, `oauth` (accepted for libpq's sake; pgtether
// answers none of them) and `none` (no authentication request at all). The server must use one of
// the listed methods. With `!` in front of every item the list says what the server must not use
// instead; `!none` requires some authentication. Negated and plain items cannot be mixed and an
// item may appear once, as in libpq. Empty (the default): anything goes.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "core/config_values.hpp"

namespace pgtether {

enum class AuthMethodBit : std::uint8_t {
    Password = 1u << 0,
    Md5 = 1u << 1,
    Scram = 1u << 2,
    Gss = 1u << 3,
    Sspi = 1u << 4,
    OAuth = 1u << 5,
    None = 1u << 6,
};

struct RequireAuth {
    static constexpr std::uint8_t kAll = 0x7f;
    std::uint8_t allowed = kAll;  // AuthMethodBit set the server may use
    std::string text;             // the setting as written, for error messages

    [[nodiscard]] bool allows(AuthMethodBit method) const {
        return (allowed & static_cast<std::uint8_t>(method)) != 0;
    }
    // The server must complete an authentication exchange before AuthenticationOk.
    [[nodiscard]] bool authentication_required() const { return !allows(AuthMethodBit::None); }
};

// Parses a server_require_auth value; the error names the offending item in libpq's words.
Parsed<RequireAuth> parse_require_auth(std::string_view text);

}  // namespace pgtether
