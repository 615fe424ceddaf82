// pgtether's way to spdlog: include this, not <spdlog/spdlog.h>.
//
// Why: Debian 12's fmt 9.1 declares no `extern template` for the one function every log call
// ends in (fmt::detail::vformat_to<char>), so each translation unit that logs compiled all of
// fmt's formatting again, although libfmt.so.9, which spdlog links, exports that very
// instantiation. Declaring it extern here makes every such file use the library's copy: under
// ASan a logging .cpp compiled in ~2 s instead of ~11 s (docs/testing.md, "Build time"). The
// declaration matches the explicit instantiation in fmt 9.1's format.cc (the library's), so it is
// only made for that fmt, linked as a library; any other fmt compiles as before.
#pragma once

#include <spdlog/spdlog.h>

#if defined(FMT_VERSION) && FMT_VERSION == 90100 && !defined(FMT_HEADER_ONLY) && \
    defined(SPDLOG_FMT_EXTERNAL)
namespace fmt {
inline namespace v9 {
namespace detail {
extern template FMT_API void vformat_to<char>(
    buffer<char>&, basic_string_view<char>,
    basic_format_args<FMT_BUFFER_CONTEXT(type_identity_t<char>)>, locale_ref);
}  // namespace detail
}  // namespace v9
}  // namespace fmt
#endif
