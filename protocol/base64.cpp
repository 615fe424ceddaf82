#include "protocol/base64.hpp"

#include <array>
#include <cstdint>

namespace pgtether::protocol {

namespace {

constexpr std::string_view kAlphabet =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

constexpr std::uint8_t kInvalid = 0xff;

constexpr std::array<std::uint8_t, 256> make_decode_table() {
    std::array<std::uint8_t, 256> table{};
    for (auto& v : table)
        v = kInvalid;
    for (std::size_t i = 0; i < kAlphabet.size(); ++i) {
        table[static_cast<unsigned char>(kAlphabet[i])] = static_cast<std::uint8_t>(i);
    }
    return table;
}

constexpr std::array<std::uint8_t, 256> kDecode = make_decode_table();

std::uint8_t decode_char(char c) {
    return kDecode[static_cast<unsigned char>(c)];
}

}  // namespace

std::string base64_encode(std::string_view raw) {
    std::string out;
    out.reserve((raw.size() + 2) / 3 * 4);
    std::size_t i = 0;
    auto byte = [&](std::size_t k) { return std::uint32_t{static_cast<unsigned char>(raw[k])}; };
    for (; i + 3 <= raw.size(); i += 3) {
        std::uint32_t group = (byte(i) << 16) | (byte(i + 1) << 8) | byte(i + 2);
        out.push_back(kAlphabet[(group >> 18) & 0x3f]);
        out.push_back(kAlphabet[(group >> 12) & 0x3f]);
        out.push_back(kAlphabet[(group >> 6) & 0x3f]);
        out.push_back(kAlphabet[group & 0x3f]);
    }
    std::size_t left = raw.size() - i;
    if (left == 1) {
        std::uint32_t group = byte(i) << 16;
        out.push_back(kAlphabet[(group >> 18) & 0x3f]);
        out.push_back(kAlphabet[(group >> 12) & 0x3f]);
        out.append("==");
    } else if (left == 2) {
        std::uint32_t group = (byte(i) << 16) | (byte(i + 1) << 8);
        out.push_back(kAlphabet[(group >> 18) & 0x3f]);
        out.push_back(kAlphabet[(group >> 12) & 0x3f]);
        out.push_back(kAlphabet[(group >> 6) & 0x3f]);
        out.push_back('=');
    }
    return out;
}

std::optional<std::string> base64_decode(std::string_view text) {
    if (text.size() % 4 != 0) return std::nullopt;
    std::size_t padding = 0;
    if (!text.empty() && text.back() == '=') {
        padding = text.size() >= 2 && text[text.size() - 2] == '=' ? 2 : 1;
    }
    std::string out;
    out.reserve(text.size() / 4 * 3);
    for (std::size_t i = 0; i < text.size(); i += 4) {
        const bool last = i + 4 == text.size();
        // Only the final quantum may carry padding; '=' anywhere else is not in the alphabet.
        const std::size_t data_chars = last ? 4 - padding : 4;
        std::uint32_t group = 0;
        for (std::size_t k = 0; k < 4; ++k) {
            std::uint8_t v = 0;
            if (k < data_chars) {
                v = decode_char(text[i + k]);
                if (v == kInvalid) return std::nullopt;
            }
            group = (group << 6) | v;
        }
        out.push_back(static_cast<char>((group >> 16) & 0xff));
        if (data_chars >= 3) out.push_back(static_cast<char>((group >> 8) & 0xff));
        if (data_chars == 4) out.push_back(static_cast<char>(group & 0xff));
        // Non-canonical: bits that padding says are unused must be zero (RFC 4648 §3.5).
        if (data_chars == 2 && (group & 0xffff) != 0) return std::nullopt;
        if (data_chars == 3 && (group & 0xff) != 0) return std::nullopt;
    }
    return out;
}

}  // namespace pgtether::protocol
