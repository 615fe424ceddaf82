#include "proxy/net/log_sqlstate.hpp"
#include "proxy/admin/admin_console.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <vector>

#include "proxy/net/log.hpp"

#include "core/config_keys.hpp"
#include "protocol/backend_messages.hpp"
#include "protocol/framing.hpp"
#include "protocol/frontend_messages.hpp"
#include "protocol/message_reader.hpp"
#include "protocol/message_types.hpp"
#include "protocol/sqlstate.hpp"
#include "protocol/statement_redaction.hpp"
#include "proxy/admin/admin_context.hpp"
#include "proxy/admin/admin_show.hpp"
#include "proxy/client/client.hpp"
#include "proxy/pool/pool_control.hpp"

namespace pgtether {

namespace fe = protocol::fe;
namespace sqlstate = protocol::sqlstate;
using protocol::MessagesRead;
using protocol::read_messages;

namespace {

// The client KILL_CLIENT `id` names on `worker`, if it is there and past its login.
Client* find_killable_client(AdminContext& worker, std::uint64_t id) {
    Client* target = nullptr;
    worker.for_each_client([&](Client& client) {
        if (client.id() == id && client.state() != Client::State::Closing &&
            client.state() != Client::State::Startup &&
            client.state() != Client::State::AuthLookup &&
            client.state() != Client::State::Auth) {
            target = &client;
        }
    });
    return target;
}

// A console command is one short line; anything this large is not one.
constexpr std::uint32_t kMaxAdminMessage = 64 * 1024;
// How much of a refused query the error message repeats.
constexpr std::size_t kQueryEcho = 200;

// Settings some drivers SET or SHOW on every connection. PgBouncer answers them with fixed
// values instead of an error (src/admin.c fake_param_list); so does pgtether.
struct FakeParam {
    const char* name;
    const char* value;
};
constexpr FakeParam kFakeParams[] = {
    {"client_encoding", "UTF-8"},
    {"default_transaction_isolation", "read committed"},
    {"standard_conforming_strings", "on"},
    {"datestyle", "ISO"},
    {"timezone", "GMT"},
    {"extra_float_digits", "2"},
};

const FakeParam* find_fake_param(std::string_view name) {
    for (const auto& p : kFakeParams) {
        if (name.size() != std::string_view(p.name).size()) continue;
        bool same = true;
        for (std::size_t i = 0; i < name.size() && same; ++i) {
            char c = name[i];
            if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
            same = c == p.name[i];
        }
        if (same) return &p;
    }
    return nullptr;
}

std::string lowered(std::string_view s) {
    std::string out(s);
    for (auto& c : out) {
        if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    }
    return out;
}

bool contains(const std::vector<std::string>& list, const std::string& name) {
    return std::find(list.begin(), list.end(), name) != list.end();
}

}  // namespace

AdminSession::AdminSession(AdminContext& worker, Client& client)
    : worker_(worker), client_(client) {}

AdminSession::~AdminSession() {
    worker_.pool_control().remove_waiter(*this);
}

AdminSession::Role AdminSession::role() const {
    const auto& config = worker_.config();
    if (client_.own_user()) return Role::Admin;
    if (contains(config.admin_users, client_.user())) return Role::Admin;
    if (contains(config.stats_users, client_.user())) return Role::Stats;
    // PgBouncer: with auth_type = any every user may look (admin_post_login).
    if (config.auth_type == AuthType::Any) return Role::Stats;
    return Role::None;
}

bool AdminSession::may_log_in() const {
    return role() != Role::None;
}

void AdminSession::send_welcome(const protocol::CancelKey& key) {
    std::string out;
    protocol::append_authentication(out, protocol::AuthRequest::Ok);
    // PgBouncer 1.18's console parameters (src/admin.c admin_setup); the server_version suffix
    // is how tools recognise a PgBouncer console.
    const std::pair<const char*, const char*> params[] = {
        {"server_version", "1.18.0/bouncer"},
        {"client_encoding", "UTF8"},
        {"server_encoding", "UTF8"},
        {"DateStyle", "ISO"},
        {"TimeZone", "GMT"},
        {"standard_conforming_strings", "on"},
        {"is_superuser", "on"},
    };
    for (const auto& [name, value] : params)
        protocol::append_parameter_status(out, name, value);
    protocol::append_backend_key_data(out, key);
    protocol::append_ready_for_query(out, protocol::kTxIdle);
    client_.send(out);
}

// ---------------------------------------------------------------------------------------------
// Input

std::size_t AdminSession::on_data(protocol::ByteSpan data) {
    if (wait_ != Wait::None) {
        // One command at a time: the next waits (unread) until PAUSE / WAIT_CLOSE / KILL_CLIENT
        // completes.
        client_.pause_input();
        return 0;
    }
    // Stops once the session is done with the connection (closed or failed); the rest of the
    // input is then discarded.
    bool discard_rest = false;
    auto back_pressure = [&]() {
        // Back-pressure: the client does not read its answers (SHOW CONFIG is ~300 times larger
        // than the query asking for it). Read no further command until the kernel took what is
        // queued (on_output_drained), so the output one session makes pgtether hold is bounded by
        // one command's answer, whatever the client pipelines.
        if (!client_.stream().write_pending()) return false;
        client_.pause_input();
        return true;
    };
    if (back_pressure()) return 0;
    const MessagesRead read = read_messages(data, kMaxAdminMessage, [&](const auto& message) {
        switch (message.type) {
            case fe::kQuery: {
                if (client_.refuse_simple_query()) {
                    discard_rest = true;
                    return false;
                }
                auto sql = protocol::parse_query(message.body());
                if (!sql) {
                    client_.fail(sqlstate::kProtocolViolation, "invalid Query message");
                    discard_rest = true;
                    return false;
                }
                execute(*sql);
                if (client_.state() == Client::State::Closing) {
                    discard_rest = true;
                    return false;
                }
                if (wait_ != Wait::None) {
                    client_.pause_input();
                    return false;
                }
                // More commands follow: not while this answer is still queued.
                const bool last =
                    message.bytes.data() + message.bytes.size() == data.data() + data.size();
                return last || !back_pressure();
            }
            case fe::kTerminate:
                client_.close("client close request");
                discard_rest = true;
                return false;
            case fe::kParse:
            case fe::kBind:
            case fe::kExecute:
            case fe::kDescribe: {
                // PgBouncer's words and way: an ERROR with ReadyForQuery, so that the client's
                // pending request fails with this message, then the connection is closed (its
                // console, too, speaks only the simple query protocol).
                const std::string text = "extended query protocol not supported by admin console";
                protocol::ErrorFields error{"ERROR",
                                            sqlstate::kFeatureNotSupported,
                                            text,
                                            {},
                                            "use the simple query protocol"};
                std::string out;
                protocol::append_error_response(out, error);
                protocol::append_ready_for_query(out, protocol::kTxIdle);
                client_.send(out);
                client_.fail(sqlstate::kFeatureNotSupported, text);
                discard_rest = true;
                return false;
            }
            default:
                client_.fail(sqlstate::kProtocolViolation,
                             std::string("unsupported packet type for admin console: '") +
                                 message.type + "'");
                discard_rest = true;
                return false;
        }
    });
    if (read.invalid) {
        client_.fail(sqlstate::kProtocolViolation,
                     read.length > kMaxAdminMessage ? "admin console message too large (max 64 kB)"
                                                    : "invalid message length");
        return data.size();
    }
    if (discard_rest) return data.size();
    return read.consumed;
}

void AdminSession::execute(std::string_view query) {
    worker_.stats().admin_queries++;
    spdlog::debug("{}: admin query: {}", client_.describe(),
                  protocol::statement_for_log(query.substr(0, kQueryEcho),
                                              worker_.config().log_statement_text));
    auto parsed = protocol::parse_admin_command(query);
    if (parsed.error == protocol::AdminParseError::TooLong) {
        send_error(sqlstate::kInvalidParameterValue,
                   "bad arguments: a name may have " + std::to_string(protocol::kAdminMaxWord) +
                       " bytes, a value " + std::to_string(protocol::kAdminMaxValue));
        return;
    }
    if (!parsed.command) {
        send_invalid_command(query);
        return;
    }
    run(*parsed.command, query);
}

// ---------------------------------------------------------------------------------------------
// Commands

void AdminSession::run(const protocol::AdminCommand& command, std::string_view query) {
    const Role current = role();
    if (current == Role::None) {
        // The user was removed from admin_users / stats_users since logging in.
        send_error(sqlstate::kInsufficientPrivilege, "not allowed");
        return;
    }
    auto syntax_error = [&]() { send_invalid_command(query); };
    const std::string& verb = command.verb;
    if (verb == "show" || verb == "select") {
        if (command.argument.empty()) return syntax_error();
        show(command.argument, query);
        return;
    }
    if (verb == "set" && command.is_set) {
        if (const FakeParam* fake = find_fake_param(command.argument)) {
            (void)fake;
            send_notice("SET ignored");
            complete("SET");
            return;
        }
        if (current != Role::Admin) {
            send_error(sqlstate::kInsufficientPrivilege, "admin access needed");
            return;
        }
        set(command);
        return;
    }
    static const char* const kCommands[] = {"pause",    "resume",     "reconnect",   "reload",
                                            "shutdown", "kill",       "kill_client", "disable",
                                            "enable",   "wait_close", "suspend"};
    if (std::find_if(std::begin(kCommands), std::end(kCommands),
                     [&](const char* c) { return verb == c; }) == std::end(kCommands)) {
        return syntax_error();
    }
    // Every command that changes anything needs admin_users; stats_users may only look. The
    // check comes before any argument is looked at, for every command alike: a command that
    // skipped it was once a PgBouncer security bug.
    if (current != Role::Admin) {
        send_error(sqlstate::kInsufficientPrivilege, "admin access needed");
        return;
    }
    auto& control = worker_.pool_control();
    const std::string& arg = command.argument;
    bool ok = true;

    if (verb == "reload" || verb == "suspend") {
        if (!arg.empty()) return syntax_error();
    }
    if (verb == "reload") {
        spdlog::info("{}: RELOAD command issued", client_.describe());
        auto error = worker_.settings_changeable()
                         ? worker_.reload_config("RELOAD")
                         : std::optional<std::string>("no configuration file to reload");
        if (error) {
            send_error(sqlstate::kConfigFileError, "RELOAD failed: " + *error);
            return;
        }
        complete("RELOAD");
    } else if (verb == "shutdown") {
        // PgBouncer 1.23's forms: SHUTDOWN, SHUTDOWN WAIT_FOR_SERVERS, SHUTDOWN WAIT_FOR_CLIENTS.
        auto mode = AdminContext::ShutdownMode::Graceful;
        std::string form = "SHUTDOWN";
        if (!arg.empty()) {
            std::string upper = arg;
            for (auto& c : upper)
                c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
            if (upper == "WAIT_FOR_SERVERS") {
                mode = AdminContext::ShutdownMode::WaitForServers;
            } else if (upper == "WAIT_FOR_CLIENTS") {
                mode = AdminContext::ShutdownMode::WaitForClients;
            } else {
                return syntax_error();
            }
            form += " " + upper;
        }
        spdlog::info("{}: {} command issued", client_.describe(), form);
        complete("SHUTDOWN");
        on_every_worker([mode](AdminContext& worker) { worker.begin_shutdown(mode); });
    } else if (verb == "suspend") {
        send_error(sqlstate::kFeatureNotSupported,
                   "SUSPEND is not supported by pgtether: it has no online restart to suspend "
                   "for");
    } else if (verb == "pause") {
        auto database = database_argument(command, "pause", ok);
        if (!ok) return;
        // PgBouncer's rule and words (admin_cmd_pause, unchanged through 1.25): only a
        // pause of everything makes a further PAUSE an error. PAUSE of a database already
        // paused by name pauses it again, waits for its servers as the first did, and answers
        // PAUSE, so that a script that pauses what may already be paused runs on.
        if (control.paused_all()) {
            send_error(sqlstate::kObjectNotInPrerequisiteState, "already suspended/paused");
            return;
        }
        spdlog::info("{}: PAUSE {} command issued", client_.describe(),
                     database.value_or("(all databases)"));
        on_every_worker(
            [database](AdminContext& worker) { worker.pool_control().pause(database); });
        start_wait(Wait::Pause, database);
    } else if (verb == "resume") {
        auto database = database_argument(command, "resume", ok);
        if (!ok) return;
        // PgBouncer's words and SQLSTATE, whichever SHUTDOWN mode runs.
        if (worker_.shutting_down() || worker_.draining()) {
            send_error(sqlstate::kProtocolViolation, "pooler is shutting down");
            return;
        }
        if (!control.resume(database)) {
            send_error(sqlstate::kObjectNotInPrerequisiteState,
                       database ? "database " + *database + " is not paused"
                                : std::string("pooler is not paused/suspended"));
            return;
        }
        worker_.tell_other_workers(
            [database](AdminContext& worker) { (void)worker.pool_control().resume(database); });
        spdlog::info("{}: RESUME {} command issued", client_.describe(),
                     database.value_or("(all databases)"));
        complete("RESUME");
    } else if (verb == "reconnect") {
        auto database = database_argument(command, "reconnect", ok);
        if (!ok) return;
        spdlog::info("{}: RECONNECT {} command issued", client_.describe(),
                     database.value_or("(all databases)"));
        on_every_worker(
            [database](AdminContext& worker) { worker.pool_control().reconnect(database); });
        complete("RECONNECT");
    } else if (verb == "kill") {
        auto database = database_argument(command, "kill", ok);
        if (!ok) return;
        spdlog::info("{}: KILL {} command issued", client_.describe(),
                     database.value_or("(all databases)"));
        on_every_worker([database](AdminContext& worker) { worker.pool_control().kill(database); });
        complete("KILL");
    } else if (verb == "kill_client") {
        std::uint64_t id = 0;
        auto [end, ec] = std::from_chars(arg.data(), arg.data() + arg.size(), id);
        // PgBouncer's words and SQLSTATE (08P01, as for all its console errors), which its
        // suite checks.
        if (arg.empty() || ec != std::errc() || end != arg.data() + arg.size()) {
            send_error(sqlstate::kProtocolViolation, "invalid client pointer supplied");
            return;
        }
        // Ids are unique in the process; the client may be any worker's (only its own loop may
        // close it).
        std::vector<std::string> found(worker_.worker_count());
        worker_.gather_all_workers([&](AdminContext& worker) {
            if (Client* target = find_killable_client(worker, id)) {
                found.at(worker.index()) = target->describe();
            }
        });
        auto owner = std::find_if(found.begin(), found.end(),
                                  [](const std::string& d) { return !d.empty(); });
        if (owner == found.end()) {
            send_error(sqlstate::kProtocolViolation, "client not found");
            return;
        }
        spdlog::info("{}: KILL_CLIENT {} command issued ({})", client_.describe(), id, *owner);
        auto kill = [id](AdminContext& worker) {
            if (Client* target = find_killable_client(worker, id)) {
                target->fail(sqlstate::kAdminShutdown,
                             "terminating connection: disconnected by an administrator "
                             "(KILL_CLIENT)");
            }
        };
        const auto target_worker = static_cast<std::size_t>(owner - found.begin());
        if (target_worker == worker_.index()) {
            complete("KILL_CLIENT");  // answer first: the target may be this very connection
            kill(worker_);
        } else if (worker_.tell_worker(
                       target_worker, [kill, console = worker_.index()](AdminContext& worker) {
                           kill(worker);
                           // The console's worker looks again at once, instead of at its next
                           // janitor tick (the tick still looks, should this post not arrive).
                           (void)worker.tell_worker(console, [](AdminContext& console_worker) {
                               console_worker.pool_control().poll_waiters();
                           });
                       })) {
            // PgBouncer (one process) has closed the client when it answers, so a client of the
            // operator's that tries the killed connection next finds it gone: the answer waits
            // until the other worker has closed it (poll), which that worker reports back.
            kill_client_id_ = id;
            start_wait(Wait::KillClient, std::nullopt);
        } else {
            complete("KILL_CLIENT");  // that worker has stopped: its clients are gone anyway
        }
    } else if (verb == "disable" || verb == "enable") {
        if (arg.empty()) {
            send_error(sqlstate::kSyntaxError, "a database is required");
            return;
        }
        auto database = database_argument(command, verb.c_str(), ok);
        if (!ok) return;
        spdlog::info("{}: {} {} command issued", client_.describe(),
                     verb == "disable" ? "DISABLE" : "ENABLE", *database);
        const std::string name = *database;
        if (verb == "disable") {
            on_every_worker([name](AdminContext& worker) { worker.pool_control().disable(name); });
            complete("DISABLE");
        } else {
            on_every_worker([name](AdminContext& worker) { worker.pool_control().enable(name); });
            complete("ENABLE");
        }
    } else if (verb == "wait_close") {
        auto database = database_argument(command, "wait in", ok);
        if (!ok) return;
        start_wait(Wait::WaitClose, database);
    }
}

void AdminSession::on_every_worker(const std::function<void(AdminContext&)>& fn) {
    // The others from their mailboxes, right after; this worker at once, so that what the
    // console reports next (PAUSE's wait, SHOW) already sees it here.
    worker_.tell_other_workers(fn);
    fn(worker_);
}

std::optional<std::string> AdminSession::database_argument(const protocol::AdminCommand& command,
                                                           const char* verb, bool& ok) {
    ok = true;
    if (command.argument.empty()) return std::nullopt;
    if (is_console_database(command.argument)) {
        send_error(sqlstate::kObjectNotInPrerequisiteState,
                   std::string("cannot ") + verb + " admin db: " + command.argument);
        ok = false;
        return std::nullopt;
    }
    if (!worker_.resolve_database(command.argument)) {
        send_error(sqlstate::kInvalidCatalogName, "no such database: " + command.argument);
        ok = false;
        return std::nullopt;
    }
    return command.argument;
}

void AdminSession::show(const std::string& argument, std::string_view query) {
    std::string what = lowered(argument);
    if (what == "help") {
        send_notice("Console usage", admin_help_text());
        complete("SHOW");
        return;
    }
    if (const FakeParam* fake = find_fake_param(what)) {
        protocol::append_row_description(pending_, {{fake->name, 25}});
        protocol::append_data_row(pending_, {std::string(fake->value)});
        complete("SHOW");
        return;
    }
    if (what == "fds" && role() != Role::Admin) {
        // Cancel keys of every connection: PgBouncer shows them to admins only.
        send_error(sqlstate::kInsufficientPrivilege, "admin access needed");
        return;
    }
    const ShowAudience audience = role() == Role::Admin ? ShowAudience::Admin : ShowAudience::Stats;
    switch (append_show(worker_, what, audience, pending_)) {
        case ShowOutcome::Done:
            complete("SHOW");
            return;
        case ShowOutcome::Unknown:
            pending_.clear();
            send_invalid_command(query);
            return;
    }
}

void AdminSession::set(const protocol::AdminCommand& command) {
    std::string key = lowered(command.argument);
    const std::string& value = command.value;
    // PostgreSQL's own SQLSTATEs for SET: unknown parameter, cannot be changed now, bad value.
    bool known = false;
    for (const auto& k : recognised_config_keys()) {
        if (k.section == "pgbouncer" && k.name == key) known = true;
    }
    if (!known) {
        send_error(sqlstate::kUndefinedObject,
                   "unrecognized configuration parameter \"" + command.argument + "\"");
        return;
    }
    if (!setting_is_changeable(key)) {
        send_error(sqlstate::kCantChangeRuntimeParam,
                   "parameter \"" + key +
                       "\" cannot be changed while pgtether runs (change the configuration "
                       "file and restart)");
        return;
    }
    if (!worker_.settings_changeable()) {
        send_error(sqlstate::kInternalError, "SET is not available");
        return;
    }
    std::string notice;
    if (auto error = worker_.set_setting(key, value, notice)) {
        send_error(sqlstate::kInvalidParameterValue, "SET failed: " + *error);
        return;
    }
    if (!notice.empty()) send_notice(notice);
    complete("SET " + key + "=" + value);
}

// ---------------------------------------------------------------------------------------------
// PAUSE, WAIT_CLOSE and KILL_CLIENT of another worker's client

void AdminSession::start_wait(Wait wait, std::optional<std::string> database) {
    wait_ = wait;
    wait_database_ = std::move(database);
    last_wait_report_.clear();
    worker_.pool_control().add_waiter(*this);
    poll();
}

void AdminSession::poll() {
    auto& control = worker_.pool_control();
    if (wait_ == Wait::Pause) {
        bool still_paused = wait_database_ ? control.paused(*wait_database_) : control.paused_all();
        if (!still_paused) {
            wait_ = Wait::None;
            control.remove_waiter(*this);
            send_error(sqlstate::kQueryCanceled, "PAUSE canceled: RESUME was issued");
            client_.resume_input();
            return;
        }
        int open = control.open_servers(wait_database_);
        if (open == 0) {
            finish_wait("PAUSE");
            return;
        }
        // Tell the operator what PAUSE waits for, the tethered clients above all: they hold
        // their servers until their locks are released. Every worker lists its own.
        std::vector<std::vector<std::string>> lines(worker_.worker_count());
        const auto database = wait_database_;
        worker_.gather_all_workers([&](AdminContext& worker) {
            for (Client* client : worker.pool_control().tethered_clients(database)) {
                lines.at(worker.index()).push_back(
                    client->describe() + " (client_id " + std::to_string(client->id()) +
                    ") holds advisory locks " +
                    (client->held_locks().empty() ? std::string("(unknown)")
                                                  : describe_locks(client->held_locks())) +
                    " on backend " + std::to_string(client->server()->backend_pid()));
            }
        });
        std::size_t tethered = 0;
        std::string report =
            "PAUSE waits for " + std::to_string(open) + " server connection(s) to be released";
        std::string detail;
        for (const auto& worker_lines : lines) {
            for (const auto& line : worker_lines) {
                ++tethered;
                if (!detail.empty()) detail += "\n";
                detail += line;
            }
        }
        if (tethered > 0) {
            report += "; " + std::to_string(tethered) + " of them held by tethered clients";
        }
        if (report + detail != last_wait_report_) {
            last_wait_report_ = report + detail;
            spdlog::info("{}: {}{}{}", client_.describe(), report, detail.empty() ? "" : ": ",
                         detail);
            send_notice(report, detail);
        }
    } else if (wait_ == Wait::WaitClose) {
        int to_close = 0;
        std::vector<int> counts(worker_.worker_count());
        const auto database = wait_database_;
        worker_.gather_all_workers([&](AdminContext& worker) {
            counts.at(worker.index()) = worker.pool_control().servers_to_close(database);
        });
        for (int count : counts) to_close += count;
        if (to_close == 0) finish_wait("WAIT_CLOSE");
    } else if (wait_ == Wait::KillClient) {
        std::vector<char> present(worker_.worker_count(), 0);
        const std::uint64_t id = kill_client_id_;
        worker_.gather_all_workers([&](AdminContext& worker) {
            present.at(worker.index()) = find_killable_client(worker, id) != nullptr;
        });
        if (std::find(present.begin(), present.end(), 1) == present.end()) {
            finish_wait("KILL_CLIENT");
        }
    }
}

void AdminSession::finish_wait(const char* tag) {
    wait_ = Wait::None;
    worker_.pool_control().remove_waiter(*this);
    complete(tag);
    client_.resume_input();
}

void AdminSession::on_output_drained() {
    if (wait_ == Wait::None) client_.resume_input();
}

void AdminSession::on_cancel_request() {
    if (wait_ == Wait::None) return;
    // PgBouncer: ^C on a waiting PAUSE resumes (admin_handle_cancel).
    if (wait_ == Wait::Pause) {
        on_every_worker([database = wait_database_](AdminContext& worker) {
            (void)worker.pool_control().resume(database);
        });
    }
    wait_ = Wait::None;
    worker_.pool_control().remove_waiter(*this);
    send_error(sqlstate::kQueryCanceled, "canceling statement due to user request");
    client_.resume_input();
}

void AdminSession::on_close() {
    wait_ = Wait::None;
    worker_.pool_control().remove_waiter(*this);
}

// ---------------------------------------------------------------------------------------------
// Output

void AdminSession::send_error(const char* code, const std::string& message) {
    if (worker_.config().log_pooler_errors) {
        LogSqlstate sqlstate(code);
        spdlog::warn("{}: pooler error: {}", client_.describe(), message);
    }
    protocol::ErrorFields error{"ERROR", code, message, {}, {}};
    protocol::append_error_response(pending_, error);
    protocol::append_ready_for_query(pending_, protocol::kTxIdle);
    client_.send(pending_);
    pending_.clear();
}

void AdminSession::send_invalid_command(std::string_view query) {
    send_error(sqlstate::kSyntaxError, "invalid command '" +
                                           std::string(query.substr(0, kQueryEcho)) +
                                           "', use SHOW HELP;");
}

void AdminSession::send_notice(const std::string& message, const std::string& detail) {
    std::string out;
    protocol::ErrorFields notice{"NOTICE", "00000", message, detail, {}};
    protocol::append_notice_response(out, notice);
    pending_ += out;
    if (wait_ != Wait::None) {
        client_.send(pending_);
        pending_.clear();
    }
}

void AdminSession::complete(const std::string& tag) {
    protocol::append_command_complete(pending_, tag);
    protocol::append_ready_for_query(pending_, protocol::kTxIdle);
    client_.send(pending_);
    pending_.clear();
}

}  // namespace pgtether
