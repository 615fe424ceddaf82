#include "proxy/net/loop_context.hpp"

#include <algorithm>
#include <stdexcept>

namespace pgtether {

LoopContext::LoopContext(std::size_t read_buffer) : scratch_(read_buffer) {
    // Decrypted data out of one read: at most what was read plus the record OpenSSL held back.
    constexpr std::size_t kTlsRecord = 16 * 1024;
    tls_plaintext_.resize(std::max(scratch_.size(), kTlsRecord));
    if (int rc = uv_loop_init(&loop_); rc != 0) {
        throw std::runtime_error(std::string("cannot create event loop: ") + uv_strerror(rc));
    }
}

LoopContext::~LoopContext() { uv_loop_close(&loop_); }

}  // namespace pgtether
