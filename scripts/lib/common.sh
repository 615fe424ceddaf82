#!/usr/bin/env bash
# Helpers shared by scripts/* and tests/bench/*: logging, the repository root, free TCP ports,
# running a command as the unprivileged `postgres` user, waiting for a listener.
# Source it; it defines functions only (plus PGT_ROOT) and changes no shell options.

# shellcheck disable=SC2034  # PGT_ROOT is used by the scripts that source this file.
PGT_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"

pgt_log() { printf '==> %s\n' "$*" >&2; }
pgt_warn() { printf 'warning: %s\n' "$*" >&2; }
pgt_die() {
    printf 'error: %s\n' "$*" >&2
    exit 1
}

# The unprivileged account daemons run under when we are root: PostgreSQL and PgBouncer both refuse
# to run as root, and pgtether is treated the same way so that tests see what production sees.
PGT_DAEMON_USER="${PGT_DAEMON_USER:-postgres}"

pgt_is_root() { [[ $(id -u) -eq 0 ]]; }

# Run "$@" as the daemon user when root, as ourselves otherwise. setpriv execs in place (no fork,
# unlike runuser/su), so `pgt_as_daemon_user cmd &` gives $! = the daemon's own pid, which the
# benchmark needs for /proc/<pid>/stat.
pgt_as_daemon_user() {
    if pgt_is_root; then
        setpriv --reuid="$PGT_DAEMON_USER" --regid="$PGT_DAEMON_USER" --init-groups \
            --reset-env -- "$@"
    else
        "$@"
    fi
}

# Give the daemon user a directory we created (no-op when not root).
pgt_chown_daemon_user() {
    if pgt_is_root; then
        chown -R "$PGT_DAEMON_USER:$PGT_DAEMON_USER" "$@"
    fi
}

# True when something listens on TCP port $1 (what makes a bind with SO_REUSEADDR fail; sockets
# in TIME_WAIT from an earlier run do not count).
pgt_port_in_use() {
    local port="$1"
    [[ -n $(ss -Htln "( sport = :$port )" 2>/dev/null) ]]
}

# Print a free TCP port. Ports are drawn below the kernel's ephemeral range
# (net.ipv4.ip_local_port_range) so that the many client sockets of a benchmark cannot be sitting on
# the port we hand out; random choice keeps parallel callers apart.
pgt_free_port() {
    local low _high span port i
    read -r low _high </proc/sys/net/ipv4/ip_local_port_range
    if ((low <= 20000)); then low=61000; fi
    span=$((low - 15000))
    for ((i = 0; i < 500; i++)); do
        port=$((15000 + (RANDOM * 32768 + RANDOM) % span))
        # Stricter than pgt_port_in_use: no socket of any state on it.
        if [[ -z $(ss -Htan "( sport = :$port )" 2>/dev/null) ]]; then
            printf '%s\n' "$port"
            return 0
        fi
    done
    pgt_die "no free TCP port found"
}

# Wait until TCP $1:$2 accepts connections. If a pid is given ($4), give up as soon as it has
# exited. Timeout $3 seconds (default 10). Returns 0 when connectable.
pgt_wait_for_port() {
    local host="$1" port="$2" timeout="${3:-10}" pid="${4:-}"
    local deadline=$((SECONDS + timeout))
    while ((SECONDS < deadline)); do
        if [[ -n $pid ]] && ! kill -0 "$pid" 2>/dev/null; then
            return 1
        fi
        # bash's /dev/tcp opens a real connection; the subshell closes it at once.
        if (exec 3<>"/dev/tcp/$host/$port") 2>/dev/null; then
            return 0
        fi
        sleep 0.1
    done
    return 1
}

# True while pid $1 exists and is not a zombie (kill -0 succeeds on zombies).
pgt_pid_alive() {
    local pid="$1" state
    [[ -r /proc/$pid/stat ]] || return 1
    # Field 3 of /proc/<pid>/stat, after the parenthesised command name (which may hold spaces).
    state=$(sed -E 's/^.*\) ([A-Za-z]).*$/\1/' "/proc/$pid/stat" 2>/dev/null) || return 1
    [[ -n $state && $state != Z && $state != X ]]
}

# Send SIGTERM to pid $1, wait up to $2 seconds (default 10), then SIGKILL. Works for processes
# that are not our children too (polls /proc).
pgt_stop_pid() {
    local pid="$1" timeout="${2:-10}"
    local deadline=$((SECONDS + timeout))
    kill -TERM "$pid" 2>/dev/null || return 0
    while pgt_pid_alive "$pid"; do
        if ((SECONDS >= deadline)); then
            pgt_warn "pid $pid ignored SIGTERM for ${timeout}s, sending SIGKILL"
            kill -KILL "$pid" 2>/dev/null || true
            sleep 0.2
            break
        fi
        sleep 0.1
    done
    # Reap it if it is our child; harmless otherwise.
    wait "$pid" 2>/dev/null || true
}

# True when pid $1 is alive and its command line mentions $2 (guards against a recycled pid).
pgt_pid_is() {
    local pid="$1" what="$2"
    # A here-string, not a pipe: under pipefail grep -q leaving early could SIGPIPE tr.
    pgt_pid_alive "$pid" && grep -q -- "$what" <<<"$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null)"
}

# Start "$@" detached from this script (own session, stdin from /dev/null, output appended to
# log file $1), as the daemon user when root. Sets PGT_SPAWNED_PID to the program's own pid:
# a background child of a non-interactive shell is not a process-group leader, so setsid and
# setpriv both exec in place.
pgt_spawn_daemon() {
    local log="$1"
    shift
    local prefix=()
    if pgt_is_root; then
        prefix=(setpriv --reuid="$PGT_DAEMON_USER" --regid="$PGT_DAEMON_USER" --init-groups
            --reset-env --)
    fi
    setsid "${prefix[@]}" "$@" </dev/null >>"$log" 2>&1 &
    PGT_SPAWNED_PID=$!
}
