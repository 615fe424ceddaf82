#include "core/metrics_text.hpp"

namespace pgtether {

std::string MetricsWriter::escape_label_value(std::string_view value) {
    std::string out;
    out.reserve(value.size());
    for (char c : value) {
        switch (c) {
            case '\\':
                out += "\\\\";
                break;
            case '"':
                out += "\\\"";
                break;
            case '\n':
                out += "\\n";
                break;
            default:
                out += c;
                break;
        }
    }
    return out;
}

void MetricsWriter::family(std::string_view name, std::string_view type, std::string_view help) {
    name_.assign(name);
    type_.assign(type);
    // Prometheus 0.0.4 names a counter family after its samples (x_total); OpenMetrics names
    // the family without the suffix.
    std::string family = name_;
    if (type_ == "counter" && format_ == MetricsFormat::Prometheus) family += "_total";
    out_ += "# HELP " + family + " " + std::string(help) + "\n";
    out_ += "# TYPE " + family + " " + type_ + "\n";
}

void MetricsWriter::write_sample_name_and_labels(const Labels& labels, std::string_view suffix) {
    out_ += name_;
    if (type_ == "counter") {
        out_ += "_total";
    } else {
        out_ += suffix;
    }
    if (!labels.empty()) {
        out_ += '{';
        bool first = true;
        for (const auto& [label, value] : labels) {
            if (!first) out_ += ',';
            first = false;
            out_ += label;
            out_ += "=\"";
            out_ += escape_label_value(value);
            out_ += '"';
        }
        out_ += '}';
    }
    out_ += ' ';
}

void MetricsWriter::sample(const Labels& labels, std::uint64_t value, std::string_view suffix) {
    write_sample_name_and_labels(labels, suffix);
    out_ += std::to_string(value);
    out_ += '\n';
}

void MetricsWriter::sample_seconds(const Labels& labels, std::uint64_t micros,
                                   std::string_view suffix) {
    write_sample_name_and_labels(labels, suffix);
    out_ += std::to_string(micros / 1'000'000);
    if (auto fraction = micros % 1'000'000; fraction != 0) {
        std::string digits = std::to_string(fraction);
        digits.insert(0, 6 - digits.size(), '0');
        while (digits.back() == '0')
            digits.pop_back();
        out_ += '.';
        out_ += digits;
    }
    out_ += '\n';
}

std::string MetricsWriter::finish() {
    if (format_ == MetricsFormat::OpenMetrics) out_ += "# EOF\n";
    return std::move(out_);
}

}  // namespace pgtether
