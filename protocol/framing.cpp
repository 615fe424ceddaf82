#include "protocol/framing.hpp"

namespace pgtether::protocol {

Frame frame_message(ByteSpan buffer, std::uint32_t max_length) {
    Frame frame;
    if (buffer.size() < kTypedHeaderSize) return frame;
    frame.type = static_cast<char>(buffer[0]);
    frame.length = load_u32(buffer.data() + 1);
    if (frame.length < 4 || frame.length > max_length) {
        frame.status = FrameStatus::Invalid;
        return frame;
    }
    frame.total = std::size_t{frame.length} + 1;
    frame.status = buffer.size() >= frame.total ? FrameStatus::Complete : FrameStatus::NeedMore;
    return frame;
}

Frame frame_startup_packet(ByteSpan buffer) {
    Frame frame;
    if (buffer.size() < kStartupHeaderSize) return frame;
    frame.length = load_u32(buffer.data());
    if (frame.length < 8 || frame.length - kStartupHeaderSize > kMaxStartupPacketLength) {
        frame.status = FrameStatus::Invalid;
        return frame;
    }
    frame.total = frame.length;
    frame.status = buffer.size() >= frame.total ? FrameStatus::Complete : FrameStatus::NeedMore;
    return frame;
}

}  // namespace pgtether::protocol
