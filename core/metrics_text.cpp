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

std::string MetricsWriter::seconds_text(std::uint64_t micros) {
    std::string out = std::to_string(micros / 1'000'000);
    if (auto fraction = micros % 1'000'000; fraction != 0) {
        std::string digits = std::to_string(fraction);
        digits.insert(0, 6 - digits.size(), '0');
        while (digits.back() == '0')
            digits.pop_back();
        out += '.';
        out += digits;
    }
    return out;
}

void MetricsWriter::sample_seconds(const Labels& labels, std::uint64_t micros,
                                   std::string_view suffix) {
    write_sample_name_and_labels(labels, suffix);
    out_ += seconds_text(micros);
    out_ += '\n';
}

void MetricsWriter::histogram(const Labels& labels, const std::vector<std::uint64_t>& bounds_us,
                              const std::vector<std::uint64_t>& cumulative, std::uint64_t sum_us) {
    // One cumulative count per bound, then +Inf: a caller's mismatch is a bug, not a sample.
    if (cumulative.size() != bounds_us.size() + 1) return;
    for (std::size_t i = 0; i < cumulative.size(); ++i) {
        Labels with_le = labels;
        with_le.emplace_back("le", i < bounds_us.size() ? seconds_text(bounds_us[i]) : "+Inf");
        sample(with_le, cumulative[i], "_bucket");
    }
    sample_seconds(labels, sum_us, "_sum");
    sample(labels, cumulative.back(), "_count");
}

std::string MetricsWriter::finish() {
    if (format_ == MetricsFormat::OpenMetrics) out_ += "# EOF\n";
    return std::move(out_);
}

}  // namespace pgtether
