#include "proxy/tether.hpp"

#include <charconv>

namespace pgtether {

namespace {

std::optional<std::uint32_t> parse_u32(const std::optional<std::string>& text) {
    if (!text) return std::nullopt;
    std::uint32_t value = 0;
    auto [end, ec] = std::from_chars(text->data(), text->data() + text->size(), value);
    if (ec != std::errc() || end != text->data() + text->size()) return std::nullopt;
    return value;
}

}  // namespace

std::string AdvisoryLockKey::key_text() const {
    if (is_bigint) return std::to_string(bigint_key());
    return std::to_string(static_cast<std::int32_t>(classid)) + "," +
           std::to_string(static_cast<std::int32_t>(objid));
}

std::string AdvisoryLockKey::describe() const {
    return key_text() + (exclusive ? " exclusive" : " shared");
}

std::optional<std::vector<AdvisoryLockKey>> decode_advisory_locks(const std::vector<Row>& rows) {
    std::vector<AdvisoryLockKey> keys;
    keys.reserve(rows.size());
    for (const auto& row : rows) {
        if (row.size() != 4 || !row[3]) return std::nullopt;
        auto classid = parse_u32(row[0]);
        auto objid = parse_u32(row[1]);
        auto objsubid = parse_u32(row[2]);
        if (!classid || !objid || !objsubid || (*objsubid != 1 && *objsubid != 2)) {
            return std::nullopt;
        }
        AdvisoryLockKey key;
        key.classid = *classid;
        key.objid = *objid;
        key.is_bigint = *objsubid == 1;
        key.exclusive = *row[3] != "ShareLock";
        keys.push_back(key);
    }
    return keys;
}

std::string describe_locks(const std::vector<AdvisoryLockKey>& keys) {
    std::string out;
    for (const auto& key : keys) {
        if (!out.empty()) out += ", ";
        out += key.describe();
    }
    return out;
}

}  // namespace pgtether
