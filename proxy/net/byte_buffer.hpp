// A growable byte buffer with cheap consumption from the front and no zero-filling on growth.
//
// Used for the bytes a connection must keep between reads (a partial message, or input held back
// while a client waits for a server) and for output the socket did not take at once. It frees its
// memory as soon as it is empty so that thousands of idle connections cost almost nothing.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>

#include "protocol/bytes.hpp"

namespace pgtether {

class ByteBuffer {
public:
    [[nodiscard]] bool empty() const { return begin_ == end_; }
    [[nodiscard]] std::size_t size() const { return end_ - begin_; }
    [[nodiscard]] protocol::ByteSpan data() const { return {data_.get() + begin_, size()}; }
    // Bytes allocated (0 once empty: the memory is given back).
    [[nodiscard]] std::size_t capacity() const { return capacity_; }

    // Room for at least `n` more bytes at the end; commit() what was actually written there.
    std::span<std::uint8_t> prepare(std::size_t n) {
        if (capacity_ - end_ < n) grow(n);
        return {data_.get() + end_, capacity_ - end_};
    }
    void commit(std::size_t n) { end_ += n; }

    void append(protocol::ByteSpan bytes) {
        if (bytes.empty()) return;
        auto room = prepare(bytes.size());
        std::memcpy(room.data(), bytes.data(), bytes.size());
        commit(bytes.size());
    }
    void append(std::string_view bytes) { append(protocol::as_bytes(bytes)); }

    void consume(std::size_t n) {
        begin_ += n;
        if (begin_ >= end_) clear();
    }
    // Empties the buffer and gives its memory back.
    void clear() {
        data_.reset();
        begin_ = end_ = capacity_ = 0;
    }

private:
    void grow(std::size_t n) {
        std::size_t used = size();
        std::size_t wanted = used + n;
        if (capacity_ >= wanted) {
            // Enough room once the live bytes move to the front.
            std::memmove(data_.get(), data_.get() + begin_, used);
        } else {
            std::size_t cap = capacity_ < 1024 ? 1024 : capacity_;
            while (cap < wanted) cap *= 2;
            std::unique_ptr<std::uint8_t[]> bigger(new std::uint8_t[cap]);
            if (used) std::memcpy(bigger.get(), data_.get() + begin_, used);
            data_ = std::move(bigger);
            capacity_ = cap;
        }
        begin_ = 0;
        end_ = used;
    }

    std::unique_ptr<std::uint8_t[]> data_;
    std::size_t begin_ = 0;
    std::size_t end_ = 0;
    std::size_t capacity_ = 0;
};

// Memory held by a set of buffers (SHOW MEM): how many hold any, their bytes, the largest.
struct BufferMemory {
    std::size_t buffers = 0;
    std::size_t bytes = 0;
    std::size_t largest = 0;

    void add(const ByteBuffer& buffer) {
        if (buffer.capacity() == 0) return;
        ++buffers;
        bytes += buffer.capacity();
        if (buffer.capacity() > largest) largest = buffer.capacity();
    }
};

}  // namespace pgtether
