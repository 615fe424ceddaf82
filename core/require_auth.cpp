#include "core/require_auth.hpp"

#include <array>
#include <utility>

namespace pgtether {

namespace {

constexpr std::array<std::pair<std::string_view, AuthMethodBit>, 7> kMethods = {{
    {"password", AuthMethodBit::Password},
    {"md5", AuthMethodBit::Md5},
    {"scram-sha-256", AuthMethodBit::Scram},
    {"gss", AuthMethodBit::Gss},
    {"sspi", AuthMethodBit::Sspi},
    {"oauth", AuthMethodBit::OAuth},
    {"none", AuthMethodBit::None},
}};

std::string_view trimmed(std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t'))
        s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t'))
        s.remove_suffix(1);
    return s;
}

}  // namespace

Parsed<RequireAuth> parse_require_auth(std::string_view text) {
    RequireAuth result;
    result.text = std::string(trimmed(text));
    if (result.text.empty()) return Parsed<RequireAuth>::ok(std::move(result));
    std::uint8_t listed = 0;
    int negated = -1;  // unknown until the first item
    std::string_view rest = result.text;
    while (true) {
        std::size_t comma = rest.find(',');
        std::string_view item = trimmed(rest.substr(0, comma));
        const bool negative = !item.empty() && item.front() == '!';
        if (negative) item.remove_prefix(1);
        const AuthMethodBit* bit = nullptr;
        for (const auto& [name, method] : kMethods) {
            if (item == name) bit = &method;
        }
        if (!bit) {
            return Parsed<RequireAuth>::fail(
                "invalid require_auth method \"" + std::string(item) +
                "\": expected a comma-separated list of password, md5, scram-sha-256, gss, "
                "sspi, oauth, none, each optionally negated with !");
        }
        if (negated == -1) negated = negative ? 1 : 0;
        if ((negated == 1) != negative) {
            return Parsed<RequireAuth>::fail("negative require_auth method \"" + std::string(item) +
                                             "\" cannot be mixed with non-negative methods");
        }
        auto b = static_cast<std::uint8_t>(*bit);
        if (listed & b) {
            return Parsed<RequireAuth>::fail("require_auth method \"" + std::string(item) +
                                             "\" is specified more than once");
        }
        listed = static_cast<std::uint8_t>(listed | b);
        if (comma == std::string_view::npos) break;
        rest.remove_prefix(comma + 1);
    }
    result.allowed = negated == 1 ? static_cast<std::uint8_t>(RequireAuth::kAll & ~listed) : listed;
    return Parsed<RequireAuth>::ok(std::move(result));
}

}  // namespace pgtether
