// Fuzzes the HTTP request-head reader of the metrics endpoint (protocol/http_request.hpp), the only
// parser there that anyone who can reach the metrics port talks to.
//
// Checked:
//  * NeedMore only while the data fits the head limit, TooLarge only beyond it;
//  * a complete or invalid head lies within the data and the limit; a complete request has a
//    token method, an HTTP/1.0 or 1.1 version, and a path without space or query string;
//  * the head alone reads the same as the head followed by anything (a pipelined body or the
//    next request), and one byte less of it is not complete yet.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "protocol/http_request.hpp"
#include "tests/fuzz/fuzz_check.hpp"

using namespace pgtether;
using pgtether::fuzz::as_text;
using pgtether::fuzz::require;

namespace {

bool same(const HttpParseResult& a, const HttpParseResult& b) {
    if (a.status != b.status || a.head_size != b.head_size ||
        a.request.has_value() != b.request.has_value()) {
        return false;
    }
    if (!a.request) return true;
    return a.request->method == b.request->method && a.request->path == b.request->path &&
           a.request->version == b.request->version && a.request->accept == b.request->accept;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view input = as_text(data, size);
    const HttpParseResult r = parse_http_request(input);
    switch (r.status) {
        case HttpParseStatus::NeedMore:
            require(size <= kMaxHttpHead && !r.request, "NeedMore fits the limit");
            return 0;
        case HttpParseStatus::TooLarge:
            require(!r.request, "TooLarge has no request");
            return 0;
        case HttpParseStatus::Invalid:
            require(!r.request, "Invalid has no request");
            break;
        case HttpParseStatus::Complete: {
            require(r.request.has_value(), "Complete has a request");
            const HttpRequest& q = *r.request;
            require(!q.method.empty(), "a method");
            require(q.version == "HTTP/1.1" || q.version == "HTTP/1.0", "a version");
            require(!q.path.empty() || input.find(" ?") != std::string_view::npos,
                    "a path unless the target is a bare query");
            require(q.path.find(' ') == std::string::npos && q.path.find('?') == std::string::npos,
                    "the path has no space and no query");
            break;
        }
    }
    require(r.head_size > 0 && r.head_size <= size && r.head_size <= kMaxHttpHead,
            "the head is within the data and the limit");
    const std::string_view head = input.substr(0, r.head_size);
    require(same(parse_http_request(head), r), "the head alone reads the same");
    const HttpParseStatus shorter = parse_http_request(head.substr(0, head.size() - 1)).status;
    require(shorter == HttpParseStatus::NeedMore, "one byte less of a head is not complete");
    const std::string followed = std::string(head) + "GET / HTTP/1.1\r\n\r\n";
    require(same(parse_http_request(followed), r), "what follows the head does not matter");
    return 0;
}
