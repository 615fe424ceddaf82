// Collects the byte ranges of messages to forward from one receive buffer, merging adjacent
// ranges, so that a whole read's worth of replies leaves in one writev() instead of one write per
// message. Ranges point into the receive buffer: flush before that buffer is reused.
#pragma once

#include <uv.h>

#include <cstddef>
#include <cstdint>

#include "protocol/bytes.hpp"

namespace pgtether {

class ForwardBatch {
public:
    static constexpr unsigned kMaxRanges = 16;

    // Adds bytes; returns false when the batch is full and must be flushed first.
    bool add(const std::uint8_t* data, std::size_t size) {
        if (size == 0) return true;
        auto* p = reinterpret_cast<char*>(const_cast<std::uint8_t*>(data));
        if (count_ > 0 && bufs_[count_ - 1].base + bufs_[count_ - 1].len == p) {
            bufs_[count_ - 1].len += size;
            return true;
        }
        if (count_ == kMaxRanges) return false;
        bufs_[count_++] = uv_buf_init(p, static_cast<unsigned>(size));
        return true;
    }
    bool add(protocol::ByteSpan bytes) { return add(bytes.data(), bytes.size()); }

    [[nodiscard]] bool empty() const { return count_ == 0; }
    [[nodiscard]] const uv_buf_t* bufs() const { return bufs_; }
    [[nodiscard]] unsigned count() const { return count_; }
    [[nodiscard]] std::size_t bytes() const {
        std::size_t n = 0;
        for (unsigned i = 0; i < count_; ++i) n += bufs_[i].len;
        return n;
    }
    void clear() { count_ = 0; }

private:
    uv_buf_t bufs_[kMaxRanges];
    unsigned count_ = 0;
};

}  // namespace pgtether
