#include "core/file_text.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace pgtether {

std::optional<std::string> read_file_text(const std::string& path, std::string* error) {
    std::FILE* f = std::fopen(path.c_str(), "rb");
    if (f == nullptr) {
        if (error) *error = std::strerror(errno);
        return std::nullopt;
    }
    std::string text;
    char buf[8192];
    for (;;) {
        std::size_t n = std::fread(buf, 1, sizeof buf, f);
        text.append(buf, n);
        if (n < sizeof buf) break;
    }
    // fopen() succeeds on a directory; the read then fails with EISDIR.
    bool failed = std::ferror(f) != 0;
    int saved_errno = errno;
    std::fclose(f);
    if (failed) {
        if (error) *error = std::strerror(saved_errno);
        return std::nullopt;
    }
    return text;
}

}  // namespace pgtether
