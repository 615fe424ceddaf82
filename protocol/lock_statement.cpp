#include "protocol/lock_statement.hpp"

#include <limits>
#include <string>

#include "protocol/ascii.hpp"
#include "protocol/sql_tokens.hpp"

namespace pgtether::protocol {

namespace {

using Tok = SqlTok;
using Token = SqlToken;

// ---------------------------------------------------------------------------------------------
// The exact shape: SELECT call [, call ...]

struct FunctionName {
    std::string_view name;
    LockFunction function;
    std::uint8_t min_args;
    std::uint8_t max_args;
};
constexpr FunctionName kFunctions[] = {
    {"pg_advisory_lock", LockFunction::Lock, 1, 2},
    {"pg_advisory_lock_shared", LockFunction::LockShared, 1, 2},
    {"pg_try_advisory_lock", LockFunction::TryLock, 1, 2},
    {"pg_try_advisory_lock_shared", LockFunction::TryLockShared, 1, 2},
    {"pg_advisory_unlock", LockFunction::Unlock, 1, 2},
    {"pg_advisory_unlock_shared", LockFunction::UnlockShared, 1, 2},
    {"pg_advisory_unlock_all", LockFunction::UnlockAll, 0, 0},
};

// Width in bytes of an integer type name, 0 if it is not one.
std::uint8_t integer_type_bytes(const Token& token) {
    if (token.kind != Tok::Word) return 0;
    if (ascii_iequals(token.text, "smallint") || ascii_iequals(token.text, "int2")) return 2;
    if (ascii_iequals(token.text, "integer") || ascii_iequals(token.text, "int") ||
        ascii_iequals(token.text, "int4")) {
        return 4;
    }
    if (ascii_iequals(token.text, "bigint") || ascii_iequals(token.text, "int8")) return 8;
    return 0;
}

bool fits(std::int64_t value, std::uint8_t bytes) {
    switch (bytes) {
        case 2: return value >= std::numeric_limits<std::int16_t>::min() &&
                       value <= std::numeric_limits<std::int16_t>::max();
        case 4: return value >= std::numeric_limits<std::int32_t>::min() &&
                       value <= std::numeric_limits<std::int32_t>::max();
        default: return true;
    }
}

class ShapeParser {
  public:
    ShapeParser(const Token* begin, const Token* end) : p_(begin), end_(end) {}

    std::optional<LockCalls> statement() {
        if (!take_if([](const Token& t) { return token_is_name(t, "select"); })) {
            return std::nullopt;
        }
        LockCalls calls;
        do {
            auto c = parenthesized_call();
            if (!c) return std::nullopt;
            calls.push_back(*c);
            if (!output_name()) return std::nullopt;
        } while (take(Tok::Comma));
        if (p_ != end_) return std::nullopt;
        return calls;
    }

  private:
    [[nodiscard]] bool at(Tok kind) const { return p_ != end_ && p_->kind == kind; }
    bool take(Tok kind) {
        if (!at(kind)) return false;
        ++p_;
        return true;
    }
    template <typename Pred>
    bool take_if(Pred pred) {
        if (p_ == end_ || !pred(*p_)) return false;
        ++p_;
        return true;
    }

    // `(pg_try_advisory_lock($1))`: parentheses change neither the call nor its result.
    std::optional<LockCall> parenthesized_call() {
        if (!take(Tok::Open)) return call();
        auto c = parenthesized_call();
        if (!c || !take(Tok::Close)) return std::nullopt;
        return c;
    }

    // An output column name renames the result column and nothing else (migration tools write
    // `SELECT pg_try_advisory_lock($1) AS locked`): `AS name`, `AS "Name"`, or a bare name
    // right before the next column or the end. A bare word anywhere else (FROM, IS, ...) is
    // left unread, so the statement is not exact. Returns false only for an AS without a name.
    bool output_name() {
        if (take_if([](const Token& t) { return token_is_name(t, "as"); })) {
            return take(Tok::Word) || take(Tok::QuotedIdent);
        }
        if ((at(Tok::Word) || at(Tok::QuotedIdent)) &&
            (p_ + 1 == end_ || (p_ + 1)->kind == Tok::Comma)) {
            ++p_;
        }
        return true;
    }

    std::optional<LockCall> call() {
        // Optionally qualified with pg_catalog (any other schema is a different function).
        if (p_ + 1 < end_ && token_is_name(*p_, "pg_catalog") && (p_ + 1)->kind == Tok::Dot) {
            p_ += 2;
        }
        if (p_ == end_) return std::nullopt;
        const FunctionName* found = nullptr;
        for (const auto& f : kFunctions) {
            if (token_is_name(*p_, f.name)) found = &f;
        }
        if (!found) return std::nullopt;
        ++p_;
        if (!take(Tok::Open)) return std::nullopt;
        LockCall result;
        result.function = found->function;
        if (!at(Tok::Close)) {
            do {
                if (result.argument_count == 2) return std::nullopt;
                auto a = argument();
                if (!a) return std::nullopt;
                result.arguments[result.argument_count++] = *a;
            } while (take(Tok::Comma));
        }
        if (!take(Tok::Close)) return std::nullopt;
        if (result.argument_count < found->min_args || result.argument_count > found->max_args) {
            return std::nullopt;
        }
        // Two keys are int4 (the other key space): a bigint there finds no function (an error,
        // which the accounting would see, but it is simpler not to claim it).
        for (std::uint8_t i = 0; i < result.argument_count; ++i) {
            const auto& a = result.arguments[i];
            if (result.argument_count == 2 &&
                (a.cast_bytes == 8 || (a.parameter == 0 && !fits(a.literal, 4)))) {
                return std::nullopt;
            }
        }
        return result;
    }

    std::optional<LockArgument> argument() {
        LockArgument a;
        bool negative = false;
        if (at(Tok::Op) && (p_->text == "-" || p_->text == "+")) {
            negative = p_->text == "-";
            ++p_;
            if (!at(Tok::Integer)) return std::nullopt;  // no sign on parameters
        }
        if (at(Tok::Integer)) {
            // Larger than bigint: the server makes it numeric, and no lock function takes that.
            std::uint64_t value = 0;
            for (char c : p_->text) {
                auto digit = static_cast<std::uint64_t>(c - '0');
                if (value > (static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()) -
                             digit) / 10) {
                    return std::nullopt;
                }
                value = value * 10 + digit;
            }
            a.literal = negative ? -static_cast<std::int64_t>(value)
                                 : static_cast<std::int64_t>(value);
            ++p_;
        } else if (at(Tok::Param)) {
            unsigned long n = 0;
            for (char c : p_->text.substr(1)) {
                n = n * 10 + static_cast<unsigned long>(c - '0');
                if (n > 65535) return std::nullopt;
            }
            if (n == 0) return std::nullopt;
            a.parameter = static_cast<std::uint16_t>(n);
            ++p_;
        } else {
            return std::nullopt;
        }
        if (take(Tok::DoubleColon)) {
            if (p_ == end_) return std::nullopt;
            a.cast_bytes = integer_type_bytes(*p_);
            if (a.cast_bytes == 0) return std::nullopt;
            ++p_;
            // A literal out of the cast's range fails on the server; claim nothing.
            if (a.parameter == 0 && !fits(a.literal, a.cast_bytes)) return std::nullopt;
        }
        return a;
    }

    const Token* p_;
    const Token* end_;
};

}  // namespace

const char* lock_function_name(LockFunction function) {
    for (const auto& f : kFunctions) {
        if (f.function == function) return f.name.data();
    }
    return "?";
}

bool lock_function_returns_bool(LockFunction function) {
    switch (function) {
        case LockFunction::TryLock:
        case LockFunction::TryLockShared:
        case LockFunction::Unlock:
        case LockFunction::UnlockShared:
            return true;
        case LockFunction::Lock:
        case LockFunction::LockShared:
        case LockFunction::UnlockAll:
            return false;
    }
    return false;
}

QueryLockPlan plan_query_locks(std::string_view sql, const SqlScanner& scanner) {
    // A text we may split differently from the server: nothing exact, and nothing known about
    // its transaction control either.
    QueryLockPlan unknown;
    QueryLockPlan plan;
    plan.safe_to_follow = true;
    std::vector<Token> tokens;
    if (!tokenize_sql(sql, tokens)) return unknown;
    bool exact = true;
    std::size_t depth = 0;
    std::size_t first = 0;  // first token of the current statement
    auto end_statement = [&](std::size_t end) {
        if (end == first) return;  // an empty statement produces no result
        const Token* b = tokens.data() + first;
        const Token* e = tokens.data() + end;
        const std::uint32_t index = plan.statement_count++;
        for (const char* word : {"begin", "start", "commit", "end", "rollback", "abort",
                                 "savepoint", "release", "prepare", "copy"}) {
            if (b->kind == Tok::Word && token_is_name(*b, word)) plan.safe_to_follow = false;
        }
        if (auto calls = ShapeParser(b, e).statement()) {
            plan.lock_statements.emplace_back(index, std::move(*calls));
            return;
        }
        // Not exact: does it touch session locks at all? The scanner decides (over-inclusively)
        // on the statement's own text.
        const char* from = b->text.data();
        const char* to = (e - 1)->text.data() + (e - 1)->text.size();
        std::string_view text(from, static_cast<std::size_t>(to - from));
        if (scanner.scan(text) & (kEffectAdvisoryLock | kEffectDiscard)) exact = false;
    };
    for (std::size_t i = 0; i < tokens.size(); ++i) {
        const Token& t = tokens[i];
        // BEGIN ATOMIC ... END: its ';' do not end the statement (PostgreSQL 14+).
        if (token_is_name(t, "atomic")) return unknown;
        if (t.kind == Tok::Open) ++depth;
        if (t.kind == Tok::Close && depth > 0) --depth;
        if (t.kind == Tok::Semicolon && depth == 0) {
            end_statement(i);
            first = i + 1;
        }
    }
    end_statement(tokens.size());
    plan.exact = exact;
    return plan;
}

std::optional<LockCalls> parse_lock_select(std::string_view sql) {
    std::vector<Token> tokens;
    if (!tokenize_sql(sql, tokens)) return std::nullopt;
    // One statement, optionally followed by ';'.
    std::size_t end = tokens.size();
    if (end > 0 && tokens[end - 1].kind == Tok::Semicolon) --end;
    for (std::size_t i = 0; i < end; ++i) {
        if (tokens[i].kind == Tok::Semicolon) return std::nullopt;
    }
    return ShapeParser(tokens.data(), tokens.data() + end).statement();
}

}  // namespace pgtether::protocol
