#include "core/ident_map.hpp"

#include "core/config.hpp"
#include "core/file_text.hpp"
#include "core/hba_tokens.hpp"

namespace pgtether {

namespace {

// One name of a line: a list, a regular expression or a group is refused with what to write.
const HbaToken& single_name(const std::vector<HbaToken>& field, const char* what,
                            const std::string& file, int line_no) {
    if (field.size() != 1) {
        throw ConfigError(file, line_no, "", std::string("a list is not allowed as ") + what);
    }
    const HbaToken& token = field[0];
    if (token.text.empty()) throw ConfigError(file, line_no, "", std::string("empty ") + what);
    // PostgreSQL reads a name starting with / as a regular expression, quoted or not; PgBouncer
    // would compare it as a plain name. Neither reading is safe to pick silently.
    if (token.text[0] == '/') {
        throw ConfigError(file, line_no, "",
                          std::string("regular expressions are not supported as ") + what +
                              " (\"" + token.text + "\"; as in PgBouncer): list each name");
    }
    return token;
}

}  // namespace

IdentMaps parse_ident_maps(std::string_view text, const std::string& file_name) {
    IdentMaps result;
    result.file = file_name;
    for_each_line(text, [&](std::string_view line, int line_no) {
        auto fields = split_hba_line(line, file_name, line_no);
        if (fields.empty()) return;
        const std::string& first = fields[0][0].text;
        if (!fields[0][0].quoted &&
            (first == "include" || first == "include_if_exists" || first == "include_dir")) {
            throw ConfigError(file_name, line_no, "",
                              "\"" + first + "\" is not supported (as in PgBouncer)");
        }
        if (fields.size() != 3) {
            throw ConfigError(file_name, line_no, "",
                              fields.size() < 3
                                  ? "expected MAPNAME SYSTEM-USERNAME PG-USERNAME"
                                  : "unexpected \"" + fields[3][0].text +
                                        "\" after MAPNAME SYSTEM-USERNAME PG-USERNAME");
        }
        const HbaToken& map = single_name(fields[0], "map name", file_name, line_no);
        IdentMapping mapping;
        mapping.line = line_no;
        mapping.system_user =
            single_name(fields[1], "system user name", file_name, line_no).text;
        const HbaToken& user = single_name(fields[2], "database user name", file_name, line_no);
        if (!user.quoted && user.text == "all") {
            mapping.any_database_user = true;
        } else if (!user.quoted && user.text[0] == '+') {
            throw ConfigError(file_name, line_no, "",
                              "group membership (\"" + user.text +
                                  "\") is not supported (as in PgBouncer)");
        } else if (user.text.find("\\1") != std::string::npos) {
            throw ConfigError(file_name, line_no, "",
                              "\\1 substitution is not supported (as in PgBouncer): it needs a "
                              "regular expression as system user name");
        } else {
            mapping.database_user = user.text;
        }
        result.maps[map.text].push_back(std::move(mapping));
    });
    return result;
}

IdentMaps load_ident_file(const std::string& path) {
    std::string error;
    auto text = read_file_text(path, &error);
    if (!text) throw ConfigError(path, 0, "", "cannot read ident map file: " + error);
    return parse_ident_maps(*text, path);
}

const IdentMapping* match_ident(const IdentMaps& maps, std::string_view map,
                                std::string_view system_user, std::string_view database_user) {
    auto found = maps.maps.find(map);
    if (found == maps.maps.end()) return nullptr;
    for (const auto& mapping : found->second) {
        if (mapping.system_user != system_user) continue;
        if (mapping.any_database_user || mapping.database_user == database_user) return &mapping;
    }
    return nullptr;
}

bool external_name_allows(const IdentMaps* maps, std::string_view map,
                          std::string_view system_name, std::string_view database_user) {
    if (system_name.empty()) return false;
    if (map.empty()) return system_name == database_user;
    return maps && match_ident(*maps, map, system_name, database_user) != nullptr;
}

}  // namespace pgtether
