#include "protocol/http_request.hpp"

#include "protocol/ascii.hpp"

namespace pgtether {

namespace {

using protocol::ascii_iequals;

std::string_view trim(std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t'))
        s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) {
        s.remove_suffix(1);
    }
    return s;
}

bool is_token_char(char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '_' || c == '.' || c == '!' || c == '#' || c == '$' || c == '%' || c == '&' ||
           c == '\'' || c == '*' || c == '+' || c == '^' || c == '`' || c == '|' || c == '~';
}

}  // namespace

HttpParseResult parse_http_request(std::string_view data) {
    HttpParseResult result;
    // A head ends with an empty line; bare LF line ends are tolerated (RFC 9112 §2.2).
    std::size_t end = data.find("\r\n\r\n");
    std::size_t terminator = 4;
    if (std::size_t lf = data.find("\n\n"); lf != std::string_view::npos && lf < end) {
        end = lf;
        terminator = 2;
    }
    if (end == std::string_view::npos) {
        result.status =
            data.size() > kMaxHttpHead ? HttpParseStatus::TooLarge : HttpParseStatus::NeedMore;
        return result;
    }
    if (end + terminator > kMaxHttpHead) {
        result.status = HttpParseStatus::TooLarge;
        return result;
    }
    result.head_size = end + terminator;
    std::string_view head = data.substr(0, end);
    result.status = HttpParseStatus::Invalid;

    // request-line = method SP request-target SP HTTP-version
    std::size_t line_end = head.find('\n');
    std::string_view line = trim(head.substr(0, line_end));
    std::size_t sp1 = line.find(' ');
    if (sp1 == std::string_view::npos || sp1 == 0) return result;
    std::size_t sp2 = line.find(' ', sp1 + 1);
    if (sp2 == std::string_view::npos || sp2 == sp1 + 1) return result;
    HttpRequest request;
    request.method.assign(line.substr(0, sp1));
    for (char c : request.method) {
        if (!is_token_char(c)) return result;
    }
    std::string_view target = line.substr(sp1 + 1, sp2 - sp1 - 1);
    request.version.assign(line.substr(sp2 + 1));
    if (request.version != "HTTP/1.1" && request.version != "HTTP/1.0") return result;
    if (target.empty() || target.find(' ') != std::string_view::npos) return result;
    request.path.assign(target.substr(0, target.find('?')));

    // header-field = field-name ":" OWS field-value OWS
    std::string_view rest =
        line_end == std::string_view::npos ? std::string_view{} : head.substr(line_end + 1);
    while (!rest.empty()) {
        std::size_t next = rest.find('\n');
        std::string_view field = rest.substr(0, next);
        rest = next == std::string_view::npos ? std::string_view{} : rest.substr(next + 1);
        if (!field.empty() && field.back() == '\r') field.remove_suffix(1);
        if (field.empty()) continue;
        std::size_t colon = field.find(':');
        if (colon == std::string_view::npos || colon == 0) return result;
        std::string_view name = field.substr(0, colon);
        for (char c : name) {
            if (!is_token_char(c)) return result;
        }
        if (ascii_iequals(name, "accept")) request.accept.assign(trim(field.substr(colon + 1)));
    }
    result.request = std::move(request);
    result.status = HttpParseStatus::Complete;
    return result;
}

}  // namespace pgtether
