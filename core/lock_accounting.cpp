#include "core/lock_accounting.hpp"

#include <algorithm>
#include <limits>

#include "protocol/backend_messages.hpp"
#include "protocol/message_types.hpp"

namespace pgtether {

namespace be = protocol::be;
using protocol::LockFunction;

namespace {

// Type OIDs (pg_type.dat).
constexpr std::uint32_t kBoolOid = 16;
constexpr std::uint32_t kInt8Oid = 20;
constexpr std::uint32_t kInt2Oid = 21;
constexpr std::uint32_t kInt4Oid = 23;
constexpr std::uint32_t kVoidOid = 2278;

bool fits(std::int64_t value, std::uint8_t bytes) {
    if (bytes == 2) {
        return value >= std::numeric_limits<std::int16_t>::min() &&
               value <= std::numeric_limits<std::int16_t>::max();
    }
    if (bytes == 4) {
        return value >= std::numeric_limits<std::int32_t>::min() &&
               value <= std::numeric_limits<std::int32_t>::max();
    }
    return true;
}

// int8in/int4in/int2in accept more (surrounding spaces); anything but [+-]digits is not claimed.
std::optional<std::int64_t> parse_text_integer(protocol::ByteSpan text) {
    std::size_t i = 0;
    bool negative = false;
    if (i < text.size() && (text[i] == '-' || text[i] == '+')) negative = text[i++] == '-';
    if (i == text.size()) return std::nullopt;
    std::uint64_t value = 0;
    const std::uint64_t limit = negative ? std::uint64_t{1} << 63
                                         : static_cast<std::uint64_t>(
                                               std::numeric_limits<std::int64_t>::max());
    for (; i < text.size(); ++i) {
        if (text[i] < '0' || text[i] > '9') return std::nullopt;
        auto digit = static_cast<std::uint64_t>(text[i] - '0');
        if (value > (limit - digit) / 10) return std::nullopt;
        value = value * 10 + digit;
    }
    if (negative) return static_cast<std::int64_t>(~value + 1);
    return static_cast<std::int64_t>(value);
}

std::optional<std::int64_t> parse_binary_integer(protocol::ByteSpan bytes, std::uint8_t width) {
    if (bytes.size() != width) return std::nullopt;
    std::uint64_t value = 0;
    for (auto b : bytes) value = (value << 8) | b;
    switch (width) {
        case 2: return static_cast<std::int16_t>(value);
        case 4: return static_cast<std::int32_t>(value);
        case 8: return static_cast<std::int64_t>(value);
        default: return std::nullopt;
    }
}

// Parse's declared type of parameter `n` (1-based): 0 when not declared.
std::optional<std::uint32_t> declared_type(protocol::ByteSpan parameter_types, std::uint16_t n) {
    if (parameter_types.size() < 2) return 0;
    const std::size_t count = protocol::load_u16(parameter_types.data());
    if (n > count) return 0;
    const std::size_t at = 2 + (std::size_t{n} - 1) * 4;
    if (at + 4 > parameter_types.size()) return std::nullopt;
    return protocol::load_u32(parameter_types.data() + at);
}

std::optional<std::int64_t> argument_value(const protocol::LockArgument& a, std::uint8_t key_count,
                                           protocol::ByteSpan parameter_types,
                                           const protocol::BindParameters* bind) {
    std::int64_t value = a.literal;
    if (a.parameter != 0) {
        if (!bind || a.parameter > bind->values.size()) return std::nullopt;
        auto declared = declared_type(parameter_types, a.parameter);
        if (!declared) return std::nullopt;
        std::uint8_t width = 0;
        switch (*declared) {
            case 0:  // inferred from the cast, or from the function
                width = a.cast_bytes != 0 ? a.cast_bytes : (key_count == 2 ? 4 : 8);
                break;
            case kInt8Oid: width = 8; break;
            case kInt4Oid: width = 4; break;
            case kInt2Oid: width = 2; break;
            default: return std::nullopt;
        }
        const auto& raw = bind->values[a.parameter - 1];
        if (!raw) return std::nullopt;  // the functions are strict: NULL takes no lock
        const auto format = bind->format_of(a.parameter - 1);
        std::optional<std::int64_t> parsed;
        if (format == 0) parsed = parse_text_integer(*raw);
        if (format == 1) parsed = parse_binary_integer(*raw, width);
        if (!parsed || !fits(*parsed, width)) return std::nullopt;
        value = *parsed;
    }
    if (a.cast_bytes != 0 && !fits(value, a.cast_bytes)) return std::nullopt;
    if (key_count == 2 && !fits(value, 4)) return std::nullopt;
    return value;
}

bool takes_exclusive(LockFunction f) {
    return f != LockFunction::LockShared && f != LockFunction::TryLockShared &&
           f != LockFunction::UnlockShared;
}

}  // namespace

std::optional<std::vector<ResolvedLockCall>> resolve_lock_calls(
    const protocol::LockCalls& calls, protocol::ByteSpan parameter_types,
    const protocol::BindParameters* bind) {
    std::vector<ResolvedLockCall> out;
    out.reserve(calls.size());
    for (const auto& call : calls) {
        ResolvedLockCall r;
        r.function = call.function;
        const bool exclusive = takes_exclusive(call.function);
        if (call.argument_count == 1) {
            auto key = argument_value(call.arguments[0], 1, parameter_types, bind);
            if (!key) return std::nullopt;
            r.key = AdvisoryLockKey::bigint(*key, exclusive);
        } else if (call.argument_count == 2) {
            auto key1 = argument_value(call.arguments[0], 2, parameter_types, bind);
            auto key2 = argument_value(call.arguments[1], 2, parameter_types, bind);
            if (!key1 || !key2) return std::nullopt;
            r.key = AdvisoryLockKey::int4_pair(static_cast<std::int32_t>(*key1),
                                               static_cast<std::int32_t>(*key2), exclusive);
        }
        out.push_back(r);
    }
    return out;
}

void LockAccounting::expect(int ready_ahead, std::uint32_t unit,
                            std::vector<ResolvedLockCall> calls) {
    expected_.push_back({ready_ahead, unit, std::move(calls), false});
}

void LockAccounting::bind_portal(std::string_view portal, std::vector<ResolvedLockCall> calls) {
    forget_portal(portal);
    portals_.emplace_back(std::string(portal), std::move(calls));
}

void LockAccounting::forget_portal(std::string_view portal) {
    std::erase_if(portals_, [&](const auto& p) { return p.first == portal; });
}

const std::vector<ResolvedLockCall>* LockAccounting::portal_calls(std::string_view portal) const {
    for (const auto& p : portals_) {
        if (p.first == portal) return &p.second;
    }
    return nullptr;
}

LockAccounting::Expectation* LockAccounting::current() {
    if (expected_.empty()) return nullptr;
    Expectation& e = expected_.front();
    return e.ready_ahead == 0 && e.unit == units_ ? &e : nullptr;
}

void LockAccounting::check_row_description(const Expectation& e, protocol::ByteSpan body) {
    auto types = protocol::parse_row_description_types(body);
    if (!types || types->size() != e.calls.size()) {
        uncertain_ = true;
        return;
    }
    for (std::size_t i = 0; i < e.calls.size(); ++i) {
        const auto want =
            protocol::lock_function_returns_bool(e.calls[i].function) ? kBoolOid : kVoidOid;
        if ((*types)[i] != want) uncertain_ = true;
    }
}

void LockAccounting::apply_row(Expectation& e, protocol::ByteSpan body) {
    auto values = protocol::parse_data_row(body);
    if (e.row_seen || !values || values->size() != e.calls.size()) {
        uncertain_ = true;
        return;
    }
    e.row_seen = true;
    for (std::size_t i = 0; i < e.calls.size(); ++i) {
        const auto& value = (*values)[i];
        if (!value) {
            uncertain_ = true;
            return;
        }
        bool succeeded = true;
        if (protocol::lock_function_returns_bool(e.calls[i].function)) {
            // Text 't'/'f', or binary 1/0 (the Bind's result formats are not needed: the two
            // encodings do not overlap).
            if (value->size() != 1) {
                uncertain_ = true;
                return;
            }
            const char c = (*value)[0];
            if (c == 't' || c == '\1') {
                succeeded = true;
            } else if (c == 'f' || c == '\0') {
                succeeded = false;
            } else {
                uncertain_ = true;
                return;
            }
        } else if (!value->empty()) {  // void prints as the empty string in both formats
            uncertain_ = true;
            return;
        }
        if (!ledger_.apply(e.calls[i], succeeded)) {
            uncertain_ = true;
            return;
        }
    }
}

void LockAccounting::on_backend_message(char type, protocol::ByteSpan body) {
    switch (type) {
        case be::kRowDescription:
            if (Expectation* e = current()) check_row_description(*e, body);
            break;
        case be::kDataRow:
            if (Expectation* e = current()) apply_row(*e, body);
            break;
        case be::kCommandComplete:
        case be::kPortalSuspended:
        case be::kEmptyQueryResponse:
            if (Expectation* e = current()) {
                if (!e->row_seen || type == be::kEmptyQueryResponse) uncertain_ = true;
                expected_.erase(expected_.begin());
            }
            ++units_;
            break;
        case be::kErrorResponse:
            // Whatever failed, the rest of the group is skipped: nothing more is sure.
            uncertain_ = true;
            ++units_;
            break;
        case be::kReadyForQuery:
            units_ = 0;
            // Results expected in this group that never came (an error ended it early).
            while (!expected_.empty() && expected_.front().ready_ahead == 0) {
                uncertain_ = true;
                expected_.erase(expected_.begin());
            }
            for (auto& e : expected_) --e.ready_ahead;
            break;
        default:
            break;
    }
}

}  // namespace pgtether
