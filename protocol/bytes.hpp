// Big-endian readers and writers for PostgreSQL wire-protocol bodies.
//
// Every integer on the wire is in network byte order (protocol §55.7 "Message Data Types").
// ByteReader never reads past its span: a short or malformed body flips it into a failed state and
// every later read returns an empty value, so decoders check ok() once at the end instead of after
// every field.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>

namespace pgtether::protocol {

using ByteSpan = std::span<const std::uint8_t>;

inline ByteSpan as_bytes(std::string_view s) {
    return {reinterpret_cast<const std::uint8_t*>(s.data()), s.size()};
}
inline std::string_view as_chars(ByteSpan b) {
    return {reinterpret_cast<const char*>(b.data()), b.size()};
}

inline std::uint32_t load_u32(const std::uint8_t* p) {
    return (std::uint32_t{p[0]} << 24) | (std::uint32_t{p[1]} << 16) | (std::uint32_t{p[2]} << 8) |
           std::uint32_t{p[3]};
}
inline std::uint16_t load_u16(const std::uint8_t* p) {
    return static_cast<std::uint16_t>((p[0] << 8) | p[1]);
}
inline void store_u32(std::uint8_t* p, std::uint32_t v) {
    p[0] = static_cast<std::uint8_t>(v >> 24);
    p[1] = static_cast<std::uint8_t>(v >> 16);
    p[2] = static_cast<std::uint8_t>(v >> 8);
    p[3] = static_cast<std::uint8_t>(v);
}

class ByteReader {
public:
    explicit ByteReader(ByteSpan data) : data_(data) {}
    explicit ByteReader(std::string_view data) : data_(as_bytes(data)) {}

    [[nodiscard]] bool ok() const { return ok_; }
    [[nodiscard]] std::size_t remaining() const { return ok_ ? data_.size() - pos_ : 0; }
    [[nodiscard]] bool at_end() const { return ok_ && pos_ == data_.size(); }

    std::uint8_t u8() {
        if (!need(1)) return 0;
        return data_[pos_++];
    }
    std::int16_t i16() {
        if (!need(2)) return 0;
        auto v = load_u16(data_.data() + pos_);
        pos_ += 2;
        return static_cast<std::int16_t>(v);
    }
    std::int32_t i32() {
        if (!need(4)) return 0;
        auto v = load_u32(data_.data() + pos_);
        pos_ += 4;
        return static_cast<std::int32_t>(v);
    }
    std::uint32_t u32() { return static_cast<std::uint32_t>(i32()); }

    // A NUL-terminated string (protocol "String"); the terminator is consumed, not returned.
    std::string_view cstring() {
        if (!ok_) return {};
        const void* nul = std::memchr(data_.data() + pos_, 0, data_.size() - pos_);
        if (nul == nullptr) {
            ok_ = false;
            return {};
        }
        auto end = static_cast<std::size_t>(static_cast<const std::uint8_t*>(nul) - data_.data());
        std::string_view s(reinterpret_cast<const char*>(data_.data()) + pos_, end - pos_);
        pos_ = end + 1;
        return s;
    }
    ByteSpan bytes(std::size_t n) {
        if (!need(n)) return {};
        auto s = data_.subspan(pos_, n);
        pos_ += n;
        return s;
    }
    ByteSpan rest() {
        if (!ok_) return {};
        auto s = data_.subspan(pos_);
        pos_ = data_.size();
        return s;
    }
    void fail() { ok_ = false; }

private:
    bool need(std::size_t n) {
        if (!ok_ || data_.size() - pos_ < n) {
            ok_ = false;
            return false;
        }
        return true;
    }

    ByteSpan data_;
    std::size_t pos_ = 0;
    bool ok_ = true;
};

// Appends protocol messages to a std::string used as a byte buffer. begin() writes the type byte
// and a placeholder length; end() patches the length (which counts itself but not the type byte).
class MessageWriter {
public:
    explicit MessageWriter(std::string& out) : out_(out) {}

    MessageWriter& begin(char type) {
        out_.push_back(type);
        return begin_untyped();
    }
    // Startup-phase packets (StartupMessage, SSLRequest, CancelRequest) have no type byte.
    MessageWriter& begin_untyped() {
        start_ = out_.size();
        out_.append(4, '\0');
        return *this;
    }
    MessageWriter& u8(std::uint8_t v) {
        out_.push_back(static_cast<char>(v));
        return *this;
    }
    MessageWriter& i16(std::int16_t v) {
        auto u = static_cast<std::uint16_t>(v);
        out_.push_back(static_cast<char>(u >> 8));
        out_.push_back(static_cast<char>(u & 0xff));
        return *this;
    }
    MessageWriter& i32(std::int32_t v) {
        std::uint8_t b[4];
        store_u32(b, static_cast<std::uint32_t>(v));
        out_.append(reinterpret_cast<const char*>(b), 4);
        return *this;
    }
    MessageWriter& cstring(std::string_view s) {
        out_.append(s);
        out_.push_back('\0');
        return *this;
    }
    MessageWriter& bytes(std::string_view s) {
        out_.append(s);
        return *this;
    }
    MessageWriter& bytes(ByteSpan s) { return bytes(as_chars(s)); }
    // `streamed_after`: bytes of the message that follow outside `out` (the rest of a body that
    // is forwarded straight from the receive buffer); the length field counts them too.
    void end(std::size_t streamed_after = 0) {
        store_u32(reinterpret_cast<std::uint8_t*>(out_.data() + start_),
                  static_cast<std::uint32_t>(out_.size() - start_ + streamed_after));
    }

private:
    std::string& out_;
    std::size_t start_ = 0;
};

}  // namespace pgtether::protocol
