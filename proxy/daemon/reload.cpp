#include "proxy/daemon/reload.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <utility>

#include "proxy/net/log.hpp"

#include "core/config_diff.hpp"
#include "proxy/daemon/logging.hpp"
#include "proxy/daemon/systemd_notify.hpp"
#include "proxy/daemon/worker.hpp"
#include "proxy/daemon/worker_group.hpp"

namespace pgtether {

LoadedConfig load_configuration(const std::string& path) {
    LoadedConfig loaded;
    loaded.config = load_config(path);
    const auto& config = *loaded.config;
    if (!config.auth_file.empty() && ::access(config.auth_file.c_str(), F_OK) != 0 &&
        errno == ENOENT) {
        // PgBouncer starts without it (and so does the documentation promise); clients that
        // need a secret from it fail to log in until it exists and a reload reads it.
        spdlog::warn("{}: auth_file: cannot read auth file \"{}\": {}", config.config_file,
                     config.auth_file, std::strerror(ENOENT));
        loaded.auth_file = std::make_shared<const AuthFile>();
        loaded.auth_file_missing = true;
    } else if (!config.auth_file.empty()) {
        loaded.auth_file = std::make_shared<const AuthFile>(load_auth_file(config.auth_file));
    } else {
        // Password methods need secrets: from auth_file, or from auth_query through auth_user
        // (which may also be set per database). cert, hba and the trusting methods do not.
        bool any_auth_user = !config.auth_user.empty();
        for (const auto& db : config.databases) {
            any_auth_user = any_auth_user || !db.auth_user.empty();
        }
        if (config.fallback_database) {
            any_auth_user = any_auth_user || !config.fallback_database->auth_user.empty();
        }
        bool password_method = config.auth_type == AuthType::Plain ||
                               config.auth_type == AuthType::Md5 ||
                               config.auth_type == AuthType::ScramSha256;
        if (password_method && !any_auth_user) {
            throw ConfigError(config.config_file, 0, "auth_file",
                              std::string("auth_type = ") + to_string(config.auth_type) +
                                  " needs an auth_file or an auth_user");
        }
        loaded.auth_file = std::make_shared<const AuthFile>();
    }
    loaded.security = load_security(config);
    return loaded;
}

ConfigReloader::ConfigReloader(std::string path, int verbose, bool quiet)
    : path_(std::move(path)), verbose_(verbose), quiet_(quiet) {}

std::string ConfigReloader::file_to_read(const Worker& worker) const {
    // PgBouncer's conffile: "changing it will make PgBouncer use another config file for next
    // RELOAD / SIGHUP" -- named in the file itself or SET on the console. Like PgBouncer's
    // cf_config_file it keeps its value when the file read next does not name one: the file last
    // read is read again (SHOW CONFIG shows the same).
    const Config& running = worker.config();
    auto it = running.other_settings.find("conffile");
    if (it != running.other_settings.end() && !it->second.empty()) return it->second;
    return running.config_file_as_given.empty() ? path_ : running.config_file_as_given;
}

std::optional<std::string> ConfigReloader::reload(Worker& worker, std::string_view trigger) {
    spdlog::info("{}: reloading {}", trigger, file_to_read(worker));
    if (notifier_) notifier_->notify("RELOADING=1");
    auto error = load_and_apply(worker);
    if (notifier_) notifier_->notify("READY=1");
    return error;
}

std::optional<std::string> ConfigReloader::load_and_apply(Worker& worker) {
    LoadedConfig loaded;
    try {
        loaded = load_configuration(file_to_read(worker));
    } catch (const std::exception& e) {
        spdlog::error("reload failed, keeping the running configuration: {}", e.what());
        return std::string(e.what());
    }
    if (loaded.auth_file_missing) {
        spdlog::warn("reload: keeping the users of the running auth_file");
        loaded.auth_file = worker.auth_file_ptr();
    }
    // What changes, from the running configuration (console SETs included). Settings a reload
    // cannot change are not among them: apply() warns about each and keeps it.
    std::vector<ConfigChange> changes = diff_configs(worker.config(), *loaded.config);
    auto error = apply(worker, std::make_shared<Config>(*loaded.config), loaded.auth_file,
                       loaded.security);
    if (!error) {
        bool any = false;
        for (const auto& change : changes) {
            if (change.needs_restart) continue;
            spdlog::info("reload: {}", change.describe());
            any = true;
        }
        if (!any) spdlog::info("reload: no setting changed");
        for (const auto& warning : configuration_warnings(worker.config()))
            spdlog::warn("{}", warning);
        spdlog::info("configuration reloaded");
    }
    return error;
}

std::optional<std::string> ConfigReloader::set(Worker& worker, std::string_view key,
                                               std::string_view value,
                                               std::string& notice) {
    auto config = std::make_shared<Config>(worker.config());
    try {
        set_config_value(*config, key, value);
    } catch (const ConfigError& e) {
        return std::string(e.what());
    }
    std::shared_ptr<const SecuritySetup> security;
    if (key.find("_tls_") != std::string_view::npos) {
        try {
            security = load_security(*config);
        } catch (const std::exception& e) {
            // Key and certificate are two settings but one pair: the first SET of a pair cannot
            // work on its own. Keep the value and the running TLS setup (PgBouncer's admin_set).
            spdlog::warn("SET {}: TLS settings could not be applied, still using the old "
                         "configuration: {}",
                         key, e.what());
            notice = std::string("TLS settings could not be applied, still using old "
                                 "configuration: ") +
                     e.what();
            security = worker.security_ptr();
        }
    }
    auto error = apply(worker, std::move(config), worker.auth_file_ptr(), std::move(security));
    if (!error) spdlog::info("SET {} = {}", key, value);
    return error;
}

std::optional<std::string> ConfigReloader::apply(Worker& worker, std::shared_ptr<Config> config,
                                                 std::shared_ptr<const AuthFile> auth_file,
                                                 std::shared_ptr<const SecuritySetup> security) {
    for (const auto& key : keep_fixed_settings(worker.config(), *config)) {
        spdlog::warn(
            "{}: cannot be changed while pgtether runs; keeping the running value "
            "until restart",
            key);
    }
    if (!security) {
        // SET of a TLS or HBA setting: the new value must work before anything changes (no TLS
        // or HBA setting is among the fixed ones, so building it after them changes nothing).
        try {
            security = load_security(*config);
        } catch (const std::exception& e) {
            spdlog::error("reload failed, keeping the running configuration: {}", e.what());
            return std::string(e.what());
        }
    }
    try {
        setup_logging(log_options_for(*config, verbose_, quiet_));
    } catch (const std::exception& e) {
        spdlog::error(
            "reload failed, keeping the running configuration: cannot set up logging: "
            "{}",
            e.what());
        return std::string("cannot set up logging: ") + e.what();
    }
    // Every worker takes the same snapshot; the others from their mailboxes, right after.
    std::shared_ptr<const Config> snapshot = std::move(config);
    worker.group().post_to_others(worker, [snapshot, auth_file, security](Worker& other) {
        other.apply_config(snapshot, auth_file, security);
    });
    worker.apply_config(snapshot, std::move(auth_file), std::move(security));
    return std::nullopt;
}

}  // namespace pgtether
