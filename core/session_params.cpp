#include "core/session_params.hpp"

#include <strings.h>

#include <algorithm>

namespace pgtether {

namespace {

constexpr std::array<std::string_view, kTrackedParamCount> kNames = {
    "client_encoding", "DateStyle", "TimeZone", "IntervalStyle", "standard_conforming_strings",
    "application_name"};

}  // namespace

std::string_view tracked_param_name(TrackedParam p) { return kNames[static_cast<std::size_t>(p)]; }

std::optional<TrackedParam> find_tracked_param(std::string_view name) {
    for (std::size_t i = 0; i < kNames.size(); ++i) {
        if (name.size() == kNames[i].size() &&
            strncasecmp(name.data(), kNames[i].data(), name.size()) == 0) {
            return static_cast<TrackedParam>(i);
        }
    }
    return std::nullopt;
}

void ParamValues::replace(std::size_t i, std::string_view value) {
    // Values come from protocol messages, whose lengths are 32-bit; so are the offsets.
    std::uint32_t start = begin(i);
    std::uint32_t old_size = ends_[i] - start;
    values_.replace(start, old_size, value);
    auto size = static_cast<std::uint32_t>(value.size());
    for (std::size_t j = i; j < kTrackedParamCount; ++j) ends_[j] = ends_[j] - old_size + size;
}

std::string quote_literal(std::string_view value) {
    // PostgreSQL converts a query from client_encoding to the server encoding before its lexer
    // sees it, and client_encoding may be one of the client-only encodings (SJIS, BIG5, GBK, UHC,
    // GB18030, JOHAB) whose two-byte characters may end in 0x5C or 0x27: "\x95\x5c" is one SJIS
    // character. Doubling backslashes and quotes byte by byte is then wrong: in `E'\x95\x5c\x5c''`
    // the conversion takes \x95\x5c as one character, leaves `\''` and so ends the literal early
    // (with backslash_quote = on) -- SQL injection into pgtether's own queries.
    //
    // A value of ASCII bytes only has no multibyte character at all, in any encoding, so doubling
    // is exact and the readable E'' form stays. Any other value is dollar-quoted with a tag the
    // value does not contain ($pgt$, $pgtx$, $pgtxx$, ...): inside a dollar-quoted string nothing
    // is an escape, and only the tag ends it. Conversion cannot make the tag appear:
    //   - every ASCII character of the converted text comes from the same ASCII byte standing as
    //     a character of its own in the original: no non-ASCII character of any PostgreSQL
    //     encoding converts to ASCII (checked exhaustively on PostgreSQL 15 for every two-byte
    //     sequence of SJIS, BIG5, GBK, UHC, GB18030, JOHAB, the EUC encodings and the single-byte
    //     encodings, and every four-byte GB18030 sequence);
    //   - so `$pgt...` in the converted value means the same bytes in the original, which the
    //     tag was chosen not to contain; and
    //   - a value that ends in the first byte of a multibyte character cannot swallow the closing
    //     `$`: 0x24 is no encoding's trail byte (the lowest is 0x30, GB18030), so the conversion
    //     fails with "invalid byte sequence" and the query fails as a whole.
    bool ascii = true;
    for (char c : value)
        ascii = ascii && static_cast<unsigned char>(c) < 0x80;
    if (ascii) {
        // E'' strings treat backslash as an escape regardless of standard_conforming_strings, so
        // doubling both quotes and backslashes is always right.
        std::string out = "E'";
        for (char c : value) {
            if (c == '\'' || c == '\\') out.push_back(c);
            out.push_back(c);
        }
        out.push_back('\'');
        return out;
    }
    // The tag "pgt" plus one more 'x' than follows any "$pgt" in the value: then the value does
    // not contain "$" + tag, which is all that matters (an occurrence of "$tag$" in value + "$tag$"
    // that started inside the value would need "$tag" inside it). Linear in the value's size.
    std::size_t most_x = 0;
    bool found = false;
    for (std::size_t at = value.find("$pgt"); at != std::string_view::npos;
         at = value.find("$pgt", at + 1)) {
        found = true;
        std::size_t x = 0;
        while (at + 4 + x < value.size() && value[at + 4 + x] == 'x')
            ++x;
        most_x = std::max(most_x, x);
    }
    std::string tag = "$pgt" + std::string(found ? most_x + 1 : 0, 'x') + "$";
    std::string out;
    out.reserve(value.size() + 2 * tag.size());
    out += tag;
    out += value;
    out += tag;
    return out;
}

bool parameters_in_sync(const ParamValues& wanted, const ParamValues& defaults,
                        const ParamValues& backend) {
    for (std::size_t i = 0; i < kTrackedParamCount; ++i) {
        auto p = static_cast<TrackedParam>(i);
        // The same choice as build_parameter_sync: the client's value, else the default.
        const ParamValues& source = wanted.has(p) ? wanted : defaults;
        if (source.has(p) && !source.same_set_value(p, backend)) return false;
    }
    return true;
}

ParameterSync build_parameter_sync(const ParamValues& wanted, const ParamValues& defaults,
                                   const ParamValues& backend) {
    ParameterSync sync;
    for (std::size_t i = 0; i < kTrackedParamCount; ++i) {
        auto p = static_cast<TrackedParam>(i);
        auto want = wanted.get(p);
        if (!want) want = defaults.get(p);
        if (!want || want == backend.get(p)) continue;
        std::string& sql = p == TrackedParam::ClientEncoding ? sync.encoding : sync.rest;
        sql += "SET ";
        sql += kNames[i];
        sql += " = ";
        sql += quote_literal(*want);
        sql += ';';
    }
    return sync;
}

}  // namespace pgtether
