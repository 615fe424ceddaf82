// Property checks inside fuzz targets. A failed check aborts, which libFuzzer reports as a crash
// (and saves the input), and which fails the ctest replay of committed inputs in normal builds.
#pragma once

#include <cstdio>
#include <cstdlib>

namespace pgtether::fuzz {

inline void require(bool ok, const char* property) {
    if (ok) return;
    std::fprintf(stderr, "fuzz property violated: %s\n", property);
    std::abort();
}

}  // namespace pgtether::fuzz
