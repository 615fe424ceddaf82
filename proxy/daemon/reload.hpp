// Loading the configuration and changing it while running: SIGHUP and the admin console's RELOAD
// re-read the files through reload(); the console's SET changes one setting through set(). Both
// end in apply(): fixed settings keep their running values (`workers` among them), logging is set
// up again (which reopens the logfile), and every worker takes the same new snapshot. A broken
// file changes nothing.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "core/auth_file.hpp"
#include "core/config.hpp"
#include "proxy/net/security.hpp"

namespace pgtether {

class Worker;

struct LoadedConfig {
    std::shared_ptr<const Config> config;
    std::shared_ptr<const AuthFile> auth_file;
    std::shared_ptr<const SecuritySetup> security;  // TLS contexts, HBA rules
    // auth_file is set but the file does not exist: `auth_file` is then empty (nobody logs in
    // with a password from it), as in PgBouncer, which starts anyway; a reload keeps the users
    // it had.
    bool auth_file_missing = false;
};

// Loads the config, its auth_file (a missing one is logged, not refused), TLS key/certificate/CA
// files and auth_hba_file, and refuses
// what the daemon cannot run (a password auth_type with neither auth_file nor
// auth_user; TLS or HBA settings that cannot work). Throws ConfigError or std::runtime_error.
LoadedConfig load_configuration(const std::string& path);

class SystemdNotifier;

class ConfigReloader {
  public:
    // `path` as given on the command line; `verbose` (the -v count) and `quiet` (-q, -d) stay as
    // the command line set them and combine with each new config's settings.
    ConfigReloader(std::string path, int verbose, bool quiet);

    [[nodiscard]] const std::string& path() const { return path_; }
    [[nodiscard]] int command_line_verbose() const { return verbose_; }
    [[nodiscard]] bool quiet() const { return quiet_; }
    // Told RELOADING=1 / READY=1 around each reload (systemd's notify protocol).
    void set_notifier(SystemdNotifier* notifier) { notifier_ = notifier; }

    // Re-reads the configuration and auth_file and applies them; on any error the running
    // configuration stays and the error message is returned. `trigger` names the cause in logs.
    std::optional<std::string> reload(Worker& worker, std::string_view trigger);
    // SET key = value: a copy of the running configuration with one setting changed, applied.
    // Returns the error, if any (a value pgtether does not act on included). A TLS
    // setting whose new value does not work yet (client_tls_key_file set before the matching
    // client_tls_cert_file) is stored while the running TLS setup stays, as PgBouncer does; then
    // `notice` says so, and the SET that completes the pair applies both.
    std::optional<std::string> set(Worker& worker, std::string_view key, std::string_view value,
                                   std::string& notice);

  private:
    // The file a RELOAD reads: conffile when the running configuration names one, else the file
    // it was read from (at first the one pgtether was started with).
    [[nodiscard]] std::string file_to_read(const Worker& worker) const;

    std::optional<std::string> load_and_apply(Worker& worker);
    // `security` is built from `config` when not given.
    std::optional<std::string> apply(Worker& worker, std::shared_ptr<Config> config,
                                     std::shared_ptr<const AuthFile> auth_file,
                                     std::shared_ptr<const SecuritySetup> security = nullptr);

    std::string path_;
    int verbose_;
    bool quiet_;
    SystemdNotifier* notifier_ = nullptr;
};

}  // namespace pgtether
