#include "protocol/admin_command.hpp"

namespace pgtether::protocol {

namespace {

bool is_space(char c) {
    return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

bool is_word_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

char lower(char c) {
    return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
}

// A cursor over the query. Every reader either consumes what it recognises and returns true, or
// leaves the position alone and returns false.
class Reader {
  public:
    explicit Reader(std::string_view text) : text_(text) {}

    [[nodiscard]] bool at_end() const { return pos_ == text_.size(); }
    [[nodiscard]] std::size_t position() const { return pos_; }
    void rewind(std::size_t pos) { pos_ = pos; }

    // Skips whitespace; returns how much was skipped.
    std::size_t skip_space() {
        std::size_t start = pos_;
        while (pos_ < text_.size() && is_space(text_[pos_]))
            ++pos_;
        return pos_ - start;
    }

    // WORD: [0-9A-Za-z_]+ or "..." with "" for a quote. `quoted` tells which form was read.
    bool word(std::string& out, bool& quoted, bool& too_long) {
        std::size_t start = pos_;
        out.clear();
        quoted = false;
        if (pos_ < text_.size() && text_[pos_] == '"') {
            if (!quoted_text('"', out, kAdminMaxWord, too_long)) {
                pos_ = start;
                return false;
            }
            quoted = true;
            return true;
        }
        while (pos_ < text_.size() && is_word_char(text_[pos_]))
            ++pos_;
        if (pos_ == start) return false;
        if (pos_ - start > kAdminMaxWord) too_long = true;
        out.assign(text_.substr(start, pos_ - start));
        return true;
    }

    // STRING: '...' with '' for a quote.
    bool string_literal(std::string& out, bool& too_long) {
        std::size_t start = pos_;
        out.clear();
        if (pos_ >= text_.size() || text_[pos_] != '\'') return false;
        if (!quoted_text('\'', out, kAdminMaxValue, too_long)) {
            pos_ = start;
            return false;
        }
        return true;
    }

    bool literal_char(char c) {
        if (pos_ < text_.size() && text_[pos_] == c) {
            ++pos_;
            return true;
        }
        return false;
    }

    // A keyword compared case-insensitively that is not followed by a word character.
    bool keyword(std::string_view word) {
        if (text_.size() - pos_ < word.size()) return false;
        for (std::size_t i = 0; i < word.size(); ++i) {
            if (lower(text_[pos_ + i]) != word[i]) return false;
        }
        std::size_t end = pos_ + word.size();
        if (end < text_.size() && is_word_char(text_[end])) return false;
        pos_ = end;
        return true;
    }

    // The end of a command: optional whitespace, an optional semicolon with whitespace after it,
    // and nothing else.
    bool finish() {
        std::size_t start = pos_;
        skip_space();
        if (literal_char(';')) skip_space();
        if (at_end()) return true;
        pos_ = start;
        return false;
    }

  private:
    // Reads a quoted run starting at the opening quote; a doubled quote inside is one quote.
    bool quoted_text(char quote, std::string& out, std::size_t limit, bool& too_long) {
        std::size_t i = pos_ + 1;
        while (i < text_.size()) {
            if (text_[i] == quote) {
                if (i + 1 < text_.size() && text_[i + 1] == quote) {
                    out.push_back(quote);
                    i += 2;
                    continue;
                }
                pos_ = i + 1;
                if (out.size() > limit) too_long = true;
                return true;
            }
            // Stop copying past the limit (the result is refused anyway) but keep scanning so the
            // caller can tell "too long" from "unterminated".
            if (out.size() <= limit) out.push_back(text_[i]);
            ++i;
        }
        return false;  // unterminated
    }

    std::string_view text_;
    std::size_t pos_ = 0;
};

AdminParseResult failure(AdminParseError error) {
    AdminParseResult result;
    result.error = error;
    return result;
}

// SET WORD (= | TO) (WORD | STRING) [;], positioned after the SET keyword.
std::optional<AdminParseResult> parse_set(Reader& in) {
    if (in.skip_space() == 0) return std::nullopt;
    AdminCommand command;
    command.verb = "set";
    command.is_set = true;
    bool quoted = false;
    bool too_long = false;
    if (!in.word(command.argument, quoted, too_long) || command.argument.empty()) {
        return std::nullopt;
    }
    std::size_t spaced = in.skip_space();
    if (!in.literal_char('=')) {
        // TO must stand apart from the key: `SET x TO y`, never `SET xTOy`.
        if (spaced == 0 || !in.keyword("to")) return std::nullopt;
    }
    in.skip_space();
    bool value_quoted = false;
    if (!in.string_literal(command.value, too_long) &&
        !in.word(command.value, value_quoted, too_long)) {
        return std::nullopt;
    }
    if (!in.finish()) return std::nullopt;
    if (too_long) return failure(AdminParseError::TooLong);
    AdminParseResult result;
    result.command = std::move(command);
    return result;
}

}  // namespace

AdminParseResult parse_admin_command(std::string_view query) {
    Reader in(query);
    in.skip_space();
    std::size_t verb_at = in.position();
    if (in.keyword("set")) {
        if (auto set = parse_set(in)) return *set;
        in.rewind(verb_at);  // not the SET form: read `set` as an ordinary (unknown) command word
    }
    AdminCommand command;
    bool quoted = false;
    bool too_long = false;
    // A quoted empty word ("") is a word to PgBouncer's regex too, but never a command.
    if (!in.word(command.verb, quoted, too_long) || command.verb.empty()) {
        return failure(AdminParseError::Syntax);
    }
    for (auto& c : command.verb)
        c = lower(c);
    std::size_t before_argument = in.position();
    if (in.skip_space() > 0) {
        bool argument_quoted = false;
        if (!in.word(command.argument, argument_quoted, too_long)) in.rewind(before_argument);
    }
    if (!in.finish()) return failure(AdminParseError::Syntax);
    if (too_long) return failure(AdminParseError::TooLong);
    AdminParseResult result;
    result.command = std::move(command);
    return result;
}

}  // namespace pgtether::protocol
