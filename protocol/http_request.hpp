// The head of an HTTP/1.x request (RFC 9112 §2-§5), as much as the metrics endpoint needs: the
// method, the path and the Accept header. Pure: no I/O.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace pgtether {

struct HttpRequest {
    std::string method;
    std::string path;     // the request target without the query string
    std::string version;  // "HTTP/1.1"
    std::string accept;   // the Accept header, "" when absent
};

enum class HttpParseStatus {
    NeedMore,  // the head is not complete yet
    Complete,  // `request` is set; `head_size` bytes were the head
    Invalid,   // not an HTTP/1.x request head
    TooLarge,  // no end of head within the limit
};

struct HttpParseResult {
    HttpParseStatus status = HttpParseStatus::NeedMore;
    std::optional<HttpRequest> request;
    std::size_t head_size = 0;
};

// Largest request head accepted (a scrape request is a few hundred bytes).
inline constexpr std::size_t kMaxHttpHead = 8192;

[[nodiscard]] HttpParseResult parse_http_request(std::string_view data);

}  // namespace pgtether
