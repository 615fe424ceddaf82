// The metrics endpoint's pure parts: the HTTP request head parser and the exposition writer.
#include <doctest/doctest.h>

#include <string>

#include "core/metrics_text.hpp"
#include "protocol/http_request.hpp"

using namespace pgtether;

TEST_CASE("HTTP request heads: complete, partial, invalid, too large") {
    std::string get = "GET /metrics?x=1 HTTP/1.1\r\nHost: a\r\nAccept: text/plain\r\n\r\n";
    auto r = parse_http_request(get);
    REQUIRE(r.status == HttpParseStatus::Complete);
    CHECK(r.request->method == "GET");
    CHECK(r.request->path == "/metrics");
    CHECK(r.request->version == "HTTP/1.1");
    CHECK(r.request->accept == "text/plain");
    CHECK(r.head_size == get.size());

    // Every prefix is incomplete, whatever the split.
    for (std::size_t n = 0; n < get.size(); ++n) {
        CAPTURE(n);
        CHECK(parse_http_request(get.substr(0, n)).status == HttpParseStatus::NeedMore);
    }

    // Header names are case-insensitive; bare LF line ends are tolerated.
    r = parse_http_request("HEAD /metrics HTTP/1.0\naccept:  application/openmetrics-text \n\n");
    REQUIRE(r.status == HttpParseStatus::Complete);
    CHECK(r.request->method == "HEAD");
    CHECK(r.request->accept == "application/openmetrics-text");

    for (const char* bad :
         {"GET\r\n\r\n", "GET /metrics\r\n\r\n", "GET /metrics HTTP/2\r\n\r\n",
          "G(T /metrics HTTP/1.1\r\n\r\n", "GET /metrics HTTP/1.1\r\nno colon\r\n\r\n",
          "GET /metrics HTTP/1.1\r\n: empty name\r\n\r\n", "\x16\x03\x01\x02\x05\r\n\r\n"}) {
        CAPTURE(bad);
        CHECK(parse_http_request(bad).status == HttpParseStatus::Invalid);
    }

    std::string huge = "GET /metrics HTTP/1.1\r\nX: " + std::string(kMaxHttpHead, 'a');
    CHECK(parse_http_request(huge).status == HttpParseStatus::TooLarge);
    CHECK(parse_http_request(huge + "\r\n\r\n").status == HttpParseStatus::TooLarge);
}

TEST_CASE("metrics writer: Prometheus text format") {
    MetricsWriter w(MetricsFormat::Prometheus);
    w.family("pgtether_queries", "counter", "Queries pooled");
    w.sample({{"database", "db"}, {"user", "u\"s\\er\n"}}, std::uint64_t{42});
    w.family("pgtether_wait_seconds", "summary", "Waits");
    w.sample_seconds({}, 1'500'000, "_sum");
    w.sample({}, std::uint64_t{3}, "_count");
    w.family("pgtether_up", "gauge", "Up");
    w.sample({}, std::uint64_t{1});
    w.family("pgtether_wait", "gauge", "Exact decimals");
    w.sample_seconds({{"n", "0"}}, 0);
    w.sample_seconds({{"n", "1"}}, 866);
    w.sample_seconds({{"n", "2"}}, 12'000'010);
    CHECK(w.finish() ==
          "# HELP pgtether_queries_total Queries pooled\n"
          "# TYPE pgtether_queries_total counter\n"
          "pgtether_queries_total{database=\"db\",user=\"u\\\"s\\\\er\\n\"} 42\n"
          "# HELP pgtether_wait_seconds Waits\n"
          "# TYPE pgtether_wait_seconds summary\n"
          "pgtether_wait_seconds_sum 1.5\n"
          "pgtether_wait_seconds_count 3\n"
          "# HELP pgtether_up Up\n"
          "# TYPE pgtether_up gauge\n"
          "pgtether_up 1\n"
          "# HELP pgtether_wait Exact decimals\n"
          "# TYPE pgtether_wait gauge\n"
          "pgtether_wait{n=\"0\"} 0\n"
          "pgtether_wait{n=\"1\"} 0.000866\n"
          "pgtether_wait{n=\"2\"} 12.00001\n");
}

TEST_CASE("metrics writer: a histogram's buckets with le in seconds, +Inf, _sum and _count") {
    MetricsWriter w(MetricsFormat::Prometheus);
    w.family("pgtether_query_duration_seconds", "histogram", "Queries");
    w.histogram({{"database", "db"}}, {100, 2'500'000}, {1, 3, 4}, 2'600'100);
    // A mismatched call writes nothing rather than a broken histogram.
    w.histogram({{"database", "x"}}, {100}, {1}, 0);
    CHECK(w.finish() ==
          "# HELP pgtether_query_duration_seconds Queries\n"
          "# TYPE pgtether_query_duration_seconds histogram\n"
          "pgtether_query_duration_seconds_bucket{database=\"db\",le=\"0.0001\"} 1\n"
          "pgtether_query_duration_seconds_bucket{database=\"db\",le=\"2.5\"} 3\n"
          "pgtether_query_duration_seconds_bucket{database=\"db\",le=\"+Inf\"} 4\n"
          "pgtether_query_duration_seconds_sum{database=\"db\"} 2.6001\n"
          "pgtether_query_duration_seconds_count{database=\"db\"} 4\n");
    CHECK(MetricsWriter::seconds_text(60'000'000) == "60");
    CHECK(MetricsWriter::seconds_text(250) == "0.00025");
}

TEST_CASE("metrics writer: OpenMetrics names counter families without _total and ends in EOF") {
    MetricsWriter w(MetricsFormat::OpenMetrics);
    w.family("pgtether_queries", "counter", "Queries pooled");
    w.sample({}, std::uint64_t{7});
    CHECK(w.finish() ==
          "# HELP pgtether_queries Queries pooled\n"
          "# TYPE pgtether_queries counter\n"
          "pgtether_queries_total 7\n"
          "# EOF\n");
}
