// auth_ident_file: PgBouncer's subset of PostgreSQL's pg_ident.conf (pgbouncer.5, "Ident map
// file format"; PostgreSQL docs §21.2 "User Name Maps"). An HBA line with `peer` or `cert` may
// name a map (`map=NAME`); the map then says which operating-system user (peer) or certificate
// common name (cert) may log in as which database user, instead of requiring the two to be equal.
//
//   # MAPNAME   SYSTEM-USERNAME   PG-USERNAME
//   ops         deploy            app_owner
//   ops         deploy            app_reader
//   admins      alice             all
//
// Each line pairs a system name with one database user, or with every user (`all`, unquoted).
// A map allows a login when any of its lines pairs the system name with the requested user.
// What PgBouncer does not support is refused naming the file and line: regular expressions
// (a name starting with /), +group, \1 substitution and include directives.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace pgtether {

struct IdentMapping {
    std::string system_user;
    bool any_database_user = false;  // `all`
    std::string database_user;       // when not `all`
    int line = 0;
};

struct IdentMaps {
    std::string file;
    std::map<std::string, std::vector<IdentMapping>, std::less<>> maps;  // by map name
};

// Parses `text`, the contents of `file_name`. Throws ConfigError ("FILE:LINE: message").
IdentMaps parse_ident_maps(std::string_view text, const std::string& file_name);
// Reads and parses the file from disk.
IdentMaps load_ident_file(const std::string& path);

// The line of map `map` that lets `system_user` log in as `database_user`, or nullptr (also
// for a map that does not exist).
[[nodiscard]] const IdentMapping* match_ident(const IdentMaps& maps, std::string_view map,
                                              std::string_view system_user,
                                              std::string_view database_user);

// Whether the name an external method vouches for (peer: the operating-system user; cert: the
// certificate's common name) may log in as `database_user`: under map `map` (an hba map=
// option), as the map's lines say; without a map (empty), only as the same name. An empty
// system name (none known) never may.
[[nodiscard]] bool external_name_allows(const IdentMaps* maps, std::string_view map,
                                        std::string_view system_name,
                                        std::string_view database_user);

}  // namespace pgtether
