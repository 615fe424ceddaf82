// Writing metric families in the Prometheus text format (version 0.0.4) or in OpenMetrics 1.0
// text, the two formats Prometheus scrapes. They differ only in details this writer handles: an
// OpenMetrics counter family is named without its "_total" suffix, and the exposition ends with
// "# EOF".
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace pgtether {

enum class MetricsFormat { Prometheus, OpenMetrics };

// Content-Type header values of the two formats.
inline constexpr const char* kPrometheusContentType = "text/plain; version=0.0.4; charset=utf-8";
inline constexpr const char* kOpenMetricsContentType =
    "application/openmetrics-text; version=1.0.0; charset=utf-8";

using Labels = std::vector<std::pair<std::string_view, std::string>>;

class MetricsWriter {
  public:
    explicit MetricsWriter(MetricsFormat format) : format_(format) {}

    // Starts a family. `name` is the sample name without suffixes; for counters, samples are
    // written as name_total. `type` is "gauge", "counter", "summary" or "histogram".
    void family(std::string_view name, std::string_view type, std::string_view help);
    // One sample of the current family. `suffix` is "" (gauge), "_total" (counter is added
    // automatically), "_sum" or "_count" (summary), "_bucket" (histogram; see histogram()).
    void sample(const Labels& labels, std::uint64_t value, std::string_view suffix = {});
    // A duration given in microseconds, written as exact decimal seconds ("0.000866").
    void sample_seconds(const Labels& labels, std::uint64_t micros, std::string_view suffix = {});
    // A histogram's samples ("histogram" family): one _bucket per bound (`bounds_us`, with
    // le in seconds) and +Inf, each counting the observations up to it (`cumulative[i]`, the
    // last being +Inf's, which is also _count), then _sum (seconds) and _count.
    void histogram(const Labels& labels, const std::vector<std::uint64_t>& bounds_us,
                   const std::vector<std::uint64_t>& cumulative, std::uint64_t sum_us);

    // Microseconds as exact decimal seconds: 866 -> "0.000866", 2500000 -> "2.5".
    static std::string seconds_text(std::uint64_t micros);

    // The exposition (adds "# EOF" for OpenMetrics).
    [[nodiscard]] std::string finish();

    // A label value with \, " and newline escaped (both formats).
    static std::string escape_label_value(std::string_view value);

  private:
    void write_sample_name_and_labels(const Labels& labels, std::string_view suffix);

    MetricsFormat format_;
    std::string out_;
    std::string name_;
    std::string type_;
};

}  // namespace pgtether
