#include "protocol/deallocate_statement.hpp"

#include <cctype>

namespace pgtether::protocol {

namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f'; }
bool is_ident_start(char c) {
    auto b = static_cast<unsigned char>(c);
    return std::isalpha(b) || c == '_' || b >= 0x80;
}
bool is_ident_cont(char c) {
    return is_ident_start(c) || std::isdigit(static_cast<unsigned char>(c)) || c == '$';
}

class Cursor {
public:
    explicit Cursor(std::string_view text) : text_(text) {}
    void skip_space() {
        while (pos_ < text_.size() && is_space(text_[pos_])) ++pos_;
    }
    [[nodiscard]] bool at_end() const { return pos_ == text_.size(); }
    [[nodiscard]] char peek() const { return text_[pos_]; }
    void advance() { ++pos_; }
    // A keyword or unquoted identifier, folded to lower case; empty if none here.
    std::string word() {
        std::string out;
        if (at_end() || !is_ident_start(peek())) return out;
        while (!at_end() && is_ident_cont(peek())) {
            out.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(peek()))));
            advance();
        }
        return out;
    }
    // A double-quoted identifier ("" is a quote inside it); nullopt if unterminated or empty.
    std::optional<std::string> quoted() {
        advance();  // opening quote
        std::string out;
        while (!at_end()) {
            char c = peek();
            advance();
            if (c != '"') {
                out.push_back(c);
            } else if (!at_end() && peek() == '"') {
                out.push_back('"');
                advance();
            } else {
                if (out.empty()) return std::nullopt;
                return out;
            }
        }
        return std::nullopt;
    }

private:
    std::string_view text_;
    std::size_t pos_ = 0;
};

}  // namespace

std::optional<std::string> parse_lone_deallocate(std::string_view sql) {
    Cursor c(sql);
    c.skip_space();
    if (c.word() != "deallocate") return std::nullopt;
    c.skip_space();
    std::optional<std::string> name;
    if (!c.at_end() && c.peek() == '"') {
        name = c.quoted();
    } else {
        std::string w = c.word();
        if (w == "prepare") {
            c.skip_space();
            if (!c.at_end() && c.peek() == '"') {
                name = c.quoted();
            } else {
                w = c.word();
                if (!w.empty()) name = w;
            }
        } else if (!w.empty()) {
            name = w;
        }
    }
    if (!name || *name == "all") return std::nullopt;
    c.skip_space();
    if (!c.at_end() && c.peek() == ';') {
        c.advance();
        c.skip_space();
    }
    if (!c.at_end()) return std::nullopt;
    return name;
}

}  // namespace pgtether::protocol
