#!/usr/bin/env bash
# Shared by the benchmark scripts (compare.sh, tls.sh, scale.sh): the state directory and its clean-up,
# starting and stopping a pooler, reading CPU time and memory from /proc, medians and ratios.
# Sourced after scripts/lib/common.sh. The scripts own these globals: state, keep, pooler_pid,
# idle_pid, idle_line, hard_limit, pooler_port, db, pin_pooler (may be empty).
# shellcheck disable=SC2154  # keep and pooler_port are the sourcing script's

# A fresh state directory /tmp/PREFIX.XXXXXX in $state, and the traps that clean up after the run
# (the idle-client helper, the pooler, the throwaway PostgreSQL, the directory unless --keep).
bench_make_state() {
    state="$(mktemp -d "/tmp/$1.XXXXXX")"
    touch "$state/.pgtether-bench"
    pooler_pid=""
    idle_pid=""
    trap bench_cleanup EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
}

bench_cleanup() {
    bench_stop_idle
    [[ -z $pooler_pid ]] || pgt_stop_pid "$pooler_pid" 10
    "$PGT_ROOT/scripts/lib/pg.sh" stop "$state/postgresql" || true
    if ((keep)); then
        pgt_log "state kept in $state"
    else
        rm -rf -- "$state"
    fi
}

# Starts pooler NAME (binary BIN, ini INI, log $state/NAME.log) on $pooler_port, under
# taskset -c $pin_pooler when set; sets pooler_pid. On failure prints why and returns 1.
bench_pooler_start() {
    local name="$1" bin="$2" ini="$3" log pin=()
    log="$state/${name//:/-}.log"
    if [[ ! -x $bin ]]; then
        printf '%s: %s is not an executable\n' "$name" "$bin" >&2
        return 1
    fi
    # taskset execs in place, so the pid stays the pooler's own.
    [[ -z ${pin_pooler:-} ]] || pin=(taskset -c "$pin_pooler")
    pgt_spawn_daemon "$log" "${pin[@]}" "$bin" "$ini"
    pooler_pid="$PGT_SPAWNED_PID"
    if ! pgt_wait_for_port 127.0.0.1 "$pooler_port" 15 "$pooler_pid"; then
        printf '%s did not start; the end of its log:\n' "$name" >&2
        tail -n 15 "$log" | sed 's/^/  | /' >&2
        pgt_stop_pid "$pooler_pid" 5
        pooler_pid=""
        return 1
    fi
}

# Raises the soft limit on open files to the hard limit (the poolers and helpers started later
# inherit it): thousands of clients are a socket each in the pooler and in the helper. Dies when
# the hard limit is below $1. Sets hard_limit.
bench_raise_fd_limit() {
    hard_limit="$(ulimit -Hn)"
    [[ $hard_limit == unlimited ]] && hard_limit=1048576
    ulimit -n "$hard_limit"
    if (($1 > hard_limit)); then
        pgt_die "$1 file descriptors needed, the hard limit is $hard_limit (raise it: ulimit -Hn, systemd LimitNOFILE=)"
    fi
}

# Starts tests/bench/idle_clients.py with N clients on $pooler_port, database $db, and any extra
# helper arguments; they stay connected until bench_stop_idle. Sets idle_pid and idle_line (the
# helper's first line); returns 1 unless it reported "READY N" within 600 s.
bench_start_idle() {
    local n="$1" line=""
    shift
    coproc IDLE {
        exec /usr/bin/python3 "$PGT_ROOT/tests/bench/idle_clients.py" --port "$pooler_port" \
            --user postgres --dbname "$db" -n "$n" "$@" 2>&1
    }
    # shellcheck disable=SC2153  # set by coproc
    idle_pid="$IDLE_PID"
    IFS= read -r -t 600 line <&"${IDLE[0]}" || true
    idle_line="$line"
    [[ $line == "READY $n" ]]
}

bench_stop_idle() {
    [[ -n $idle_pid ]] || return 0
    kill -TERM "$idle_pid" 2>/dev/null || true
    wait "$idle_pid" 2>/dev/null || true
    idle_pid=""
}

pooler_stop() {
    [[ -z $pooler_pid ]] || pgt_stop_pid "$pooler_pid" 10
    pooler_pid=""
}

# pid -> fields=(state ppid ... utime stime cutime cstime ...) from /proc/<pid>/stat, counted after
# the parenthesised command name (which may contain spaces): utime is ${fields[11]}. Bash builtins
# only: these run around the measured window and must not add processes to it.
stat_fields() {
    local line
    { read -r line <"/proc/$1/stat"; } 2>/dev/null || return 1
    read -ra fields <<<"${line##*) }"
    [[ ${#fields[@]} -gt 15 ]]
}

# utime + stime of pid $1 in clock ticks (0 when it has gone).
cpu_ticks() {
    stat_fields "$1" || { echo 0; return; }
    echo $((fields[11] + fields[12]))
}

rss_kib() { awk '/^VmRSS:/ { print $2 }' "/proc/$1/status"; }

# The median of the numbers on stdin ("" if none).
median() {
    sort -g | awk '{ v[NR] = $1 } END {
        if (NR == 0) exit
        if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
# The median of a space-separated list.
med() { tr ' ' '\n' <<<"${1:-}" | { grep . || true; } | median; }
fmt() { if [[ -n $1 ]]; then printf "%.${2:-0}f" "$1"; else printf 'n/a'; fi; }
ratio() { if [[ -n $1 && -n $2 ]]; then awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else printf "n/a" }'; else printf 'n/a'; fi; }
