// Loads the env file written by scripts/lib/pg.sh.
#include "tests/integration/support/test_env.hpp"

#include <cstdlib>
#include <fstream>
#include <map>
#include <stdexcept>

namespace pgtether::itest {

namespace {

std::string env_or(const char* name, const std::string& fallback) {
    const char* value = std::getenv(name);
    return value != nullptr && *value != '\0' ? std::string(value) : fallback;
}

std::vector<std::string> split(const std::string& s, char sep) {
    std::vector<std::string> parts;
    std::string::size_type start = 0;
    while (start <= s.size()) {
        auto end = s.find(sep, start);
        if (end == std::string::npos) end = s.size();
        parts.push_back(s.substr(start, end - start));
        start = end + 1;
    }
    return parts;
}

}  // namespace

const AuthUser& TestEnv::auth_user(std::string_view method) const {
    for (const auto& user : auth_users) {
        if (user.method == method) return user;
    }
    throw std::runtime_error("no auth-test role with method " + std::string(method) +
                             " (see PGT_PG_AUTH_USERS in scripts/lib/pg.sh)");
}

TestEnv TestEnv::load(const std::string& env_file) {
    std::ifstream in(env_file);
    if (!in) {
        throw std::runtime_error("cannot read " + env_file +
                                 " (written by `scripts/lib/pg.sh start`; run the tests through "
                                 "ctest so the pg_start fixture runs first)");
    }
    std::map<std::string, std::string> kv;
    std::string line;
    while (std::getline(in, line)) {
        if (line.empty() || line[0] == '#') continue;
        auto eq = line.find('=');
        if (eq == std::string::npos) continue;
        kv[line.substr(0, eq)] = line.substr(eq + 1);
    }
    auto need = [&](const char* key) -> const std::string& {
        auto it = kv.find(key);
        if (it == kv.end()) throw std::runtime_error(env_file + ": missing " + key);
        return it->second;
    };

    TestEnv env;
    env.pg_host = need("PGT_PG_HOST");
    env.pg_port = std::stoi(need("PGT_PG_PORT"));
    env.pg_socket_dir = need("PGT_PG_SOCKET_DIR");
    env.pg_data = need("PGT_PG_DATA");
    env.pg_bin = need("PGT_PG_BIN");
    env.pg_log = need("PGT_PG_LOG");
    env.tmp_dir = kv.count("PGT_PG_TMP") != 0 ? kv["PGT_PG_TMP"] : "/tmp";
    env.superuser = need("PGT_PG_SUPERUSER");
    env.database = need("PGT_PG_DATABASE");
    // "name:method:password,name:method:password"
    for (const auto& entry : split(need("PGT_PG_AUTH_USERS"), ',')) {
        if (entry.empty()) continue;
        auto fields = split(entry, ':');
        if (fields.size() != 3) throw std::runtime_error(env_file + ": bad auth user " + entry);
        env.auth_users.push_back({fields[0], fields[1], fields[2]});
    }
    env.pgtether_bin = env_or("PGTETHER_BIN", "");
    env.pgtether_sanitized = env_or("PGT_PGTETHER_SANITIZED", "0") == "1";
    env.pgbouncer_bin = env_or("PGT_PGBOUNCER_BIN", "/usr/sbin/pgbouncer");
    return env;
}

const TestEnv& TestEnv::get() {
    static const TestEnv env = [] {
        const char* path = std::getenv("PGT_ENV_FILE");
        if (path == nullptr || *path == '\0') {
            throw std::runtime_error(
                "PGT_ENV_FILE is not set: run integration tests through ctest (it starts the "
                "throwaway PostgreSQL and sets it), or export it after `scripts/lib/pg.sh start "
                "DIR`");
        }
        return load(path);
    }();
    return env;
}

}  // namespace pgtether::itest
