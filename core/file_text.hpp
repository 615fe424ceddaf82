// Reading a configuration file (ini, auth_file, auth_hba_file) whole.
#pragma once

#include <optional>
#include <string>

namespace pgtether {

// The file's bytes; nullopt when it cannot be opened or read (a directory opens but fails to
// read), with strerror(errno) in `error` when given.
std::optional<std::string> read_file_text(const std::string& path, std::string* error = nullptr);

}  // namespace pgtether
