#!/usr/bin/env bash
# Where a pooler's time goes per transaction, with instruments that do not need a quiet machine
# (not a timed test; run it by hand). docs/benchmarks.md ("Per transaction", issue 13) has results.
#
# For each pooler, on one throwaway PostgreSQL and with the same generated ini (transaction
# pooling, 20 backends, trust authentication):
#  * instructions per transaction: the pooler runs under valgrind's callgrind twice, once for
#    `pgbench -t N1` and once for `-t N2` (N = transactions over all clients); the difference of
#    the two totals divided by N2 - N1 cancels start-up, logins and shutdown. Instruction counts
#    repeat to within a few per transaction whatever else the machine does.
#  * system calls per transaction: `perf stat` on syscall tracepoints of the running pooler during
#    `pgbench -T SECONDS` (no ptrace, so the pooler runs at full speed), and the pooler's user and
#    system CPU time per transaction over the same run.
# With --keep the callgrind files stay in the state directory, for callgrind_annotate.
set -euo pipefail

# shellcheck source=scripts/lib/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib/common.sh"
# shellcheck source=tests/bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

usage() {
    cat <<'USAGE'
usage: tests/bench/profile.sh [options]
  --clients N             pgbench clients (default 1)
  --protocol MODE         pgbench -M: simple, extended or prepared (default simple)
  --transactions "N1 N2"  transactions of the two callgrind runs (default "1000 4000")
  --seconds S             length of the system-call run (default 5; 0 skips it)
  --no-callgrind          only count system calls
  --cache-sim             callgrind also simulates the caches: data reads and writes, L1 and
                          last-level misses per transaction (valgrind's model of a generic cache,
                          not this CPU's; a comparison between poolers, not a measurement)
  --targets "LIST"        any of pgbouncer, pgtether, relay:epoll, relay:uring, relay:pool,
                          relay:pool:N (the floor under a pooler's cost,
                          tests/bench/relay_floor.cpp; default
                          "pgbouncer pgtether")
  --pgtether PATH         pgtether binary (default build/proxy/pgtether)
  --pgbouncer PATH        pgbouncer binary (default: pgbouncer on PATH or /usr/sbin/pgbouncer)
  --keep                  keep the state directory (callgrind files, logs)
USAGE
    exit "${1:-2}"
}

clients=1
protocol=simple
transactions="1000 4000"
seconds=5
callgrind=1
cache_sim=0
targets="pgbouncer pgtether"
keep=0
pgtether_bin="${PGT_BUILD_DIR:-$PGT_ROOT/build}/proxy/pgtether"
pgbouncer_bin="$(command -v pgbouncer || echo /usr/sbin/pgbouncer)"
while (($#)); do
    case "$1" in
    --clients) clients="$2"; shift 2 ;;
    --protocol) protocol="$2"; shift 2 ;;
    --transactions) transactions="$2"; shift 2 ;;
    --seconds) seconds="$2"; shift 2 ;;
    --no-callgrind) callgrind=0; shift ;;
    --cache-sim) cache_sim=1; shift ;;
    --targets) targets="$2"; shift 2 ;;
    --pgtether) pgtether_bin="$2"; shift 2 ;;
    --pgbouncer) pgbouncer_bin="$2"; shift 2 ;;
    --keep) keep=1; shift ;;
    -h | --help) usage 0 ;;
    *) usage ;;
    esac
done
read -r n1 n2 <<<"$transactions"
[[ $clients =~ ^[1-9][0-9]*$ && $seconds =~ ^[0-9]+$ && $n1 =~ ^[1-9][0-9]*$ ]] || usage
if [[ ! $n2 =~ ^[1-9][0-9]*$ ]] || ((n2 <= n1)); then usage; fi
if ((callgrind)) && ! command -v valgrind >/dev/null; then pgt_die "valgrind is not installed"; fi
if ((seconds > 0)) && ! command -v perf >/dev/null; then pgt_die "perf is not installed"; fi

db=bench
bench_make_state pgtether-profile
pgt_log "starting a throwaway PostgreSQL, pgbench -i -s 10"
"$PGT_ROOT/scripts/lib/pg.sh" start "$state/postgresql" --db "$db" --pgbench-scale 10 \
    --max-connections $((clients + 50 > 300 ? clients + 50 : 300)) >/dev/null
# shellcheck source=/dev/null
source "$state/postgresql/pg.env"
pooler_port="$(pgt_free_port)"
bench_write_ini "$state/pooler.ini" profile.sh trust $((clients + 100))
# Nothing periodic may fall into one callgrind run and not the other: no stats lines (both
# poolers), no periodic lock discovery (pgtether only; the one at the pool's first login is in
# both runs alike).
echo "stats_period = 86400" >>"$state/pooler.ini"
{
    cat "$state/pooler.ini"
    echo "advisory_lock_discovery_interval = 86400"
} >"$state/pgtether.ini"
printf '"postgres" ""\n' >"$state/userlist.txt"
bench_prepare_relays "$targets"
pgt_chown_daemon_user "$state"

pgbench() {
    "$PGT_PG_BIN/pgbench" -h 127.0.0.1 -p "$pooler_port" -U postgres -n -S -M "$protocol" \
        -c "$clients" -j $((clients > 1 ? 2 : 1)) "$@" "$db"
}

# Starts pooler $1 (its binary under an optional prefix, e.g. valgrind); sets pooler_pid.
start_pooler() {
    local name="$1"
    shift
    local bin="$pgbouncer_bin" ini="$state/pooler.ini"
    if [[ $name == pgtether ]]; then
        bin="$pgtether_bin"
        ini="$state/pgtether.ini"
    elif [[ $name == relay:* ]]; then
        bin="$state/relay_floor"
        ini="$state/${name//:/-}.ini"
    fi
    pgt_spawn_daemon "$state/$name.log" "$@" "$bin" "$ini"
    pooler_pid="$PGT_SPAWNED_PID"
    pgt_wait_for_port 127.0.0.1 "$pooler_port" 60 "$pooler_pid" ||
        pgt_die "$name did not start (see $state/$name.log)"
}

stop_pooler() {
    pgt_stop_pid "$pooler_pid" 60
    wait "$pooler_pid" 2>/dev/null || true
    pooler_pid=""
}

# The event totals of one callgrind run of $2 transactions through pooler $1, space-separated in
# the order of the file's "events:" line (Ir alone, or with --cache-sim Ir Dr Dw I1mr D1mr D1mw
# ILmr DLmr DLmw).
callgrind_totals() {
    local name="$1" total="$2" out="$state/callgrind.$1.$2" sim=()
    ((cache_sim)) && sim=(--cache-sim=yes)
    start_pooler "$name" valgrind --tool=callgrind "${sim[@]}" "--callgrind-out-file=$out"
    pgbench -t $((total / clients)) >"$state/pgbench.$name.$total.txt" 2>&1 ||
        pgt_die "pgbench failed (see $state/pgbench.$name.$total.txt)"
    stop_pooler
    awk '/^totals:/ { $1 = ""; print substr($0, 2) }' "$out"
}

syscalls=(read write readv writev recvfrom sendto recvmsg sendmsg epoll_wait epoll_ctl io_uring_enter)
# and every system call, page faults (kernel time that no listed call shows) and context switches
extra_events=(raw_syscalls:sys_enter page-faults context-switches)
for target in $targets; do
    case "$target" in pgbouncer | pgtether | relay:epoll | relay:uring | relay:pool | relay:pool:[1-9]) ;; *) usage ;; esac
    if ((callgrind)); then
        first="$(callgrind_totals "$target" "$n1")"
        second="$(callgrind_totals "$target" "$n2")"
        callgrind_events="$(awk '/^events:/ { $1 = ""; print substr($0, 2); exit }' \
            "$state/callgrind.$target.$n2")"
        printf '%-10s %s clients, -M %s: %d instructions per transaction\n' "$target" "$clients" \
            "$protocol" $(((${second%% *} - ${first%% *}) / (n2 - n1)))
        if ((cache_sim)); then
            printf '%-10s %s clients, -M %s: per transaction:' "$target" "$clients" "$protocol"
            awk -v names="$callgrind_events" -v a="$first" -v b="$second" -v n=$((n2 - n1)) 'BEGIN {
                k = split(names, name, " "); split(a, x, " "); split(b, y, " ")
                for (i = 2; i <= k; i++) printf " %s %.1f", name[i], (y[i] - x[i]) / n
                print "" }'
        fi
    fi
    if ((seconds > 0)); then
        start_pooler "$target"
        pgbench -T 1 >/dev/null 2>&1 || true  # the pool's backends log in first
        events="$(printf 'syscalls:sys_enter_%s,' "${syscalls[@]}")$(IFS=,; echo "${extra_events[*]}")"
        perf stat -x, -e "${events%,}" -p "$pooler_pid" -o "$state/perf.$target.txt" &
        perf_pid=$!
        stat_fields "$pooler_pid"
        user0=${fields[11]} system0=${fields[12]}
        pgbench -T "$seconds" >"$state/pgbench.$target.T.txt" 2>&1 ||
            pgt_die "pgbench failed (see $state/pgbench.$target.T.txt)"
        stat_fields "$pooler_pid"
        user1=${fields[11]} system1=${fields[12]}
        kill -INT "$perf_pid"
        wait "$perf_pid" || true
        stop_pooler
        done_tx="$(awk '/actually processed/ { split($6, a, "/"); print a[1] }' \
            "$state/pgbench.$target.T.txt")"
        printf '%-10s %s clients, -M %s: system calls per transaction:' "$target" "$clients" \
            "$protocol"
        awk -F, -v tx="$done_tx" '/syscalls:sys_enter_/ && $1 + 0 > 0 {
            name = $3; sub("syscalls:sys_enter_", "", name); printf " %s %.3f", name, $1 / tx }
            $3 == "raw_syscalls:sys_enter" { printf ", all %.3f", $1 / tx }
            $3 == "page-faults" { printf "; page faults %.3f", $1 / tx }
            $3 == "context-switches" { printf ", context switches %.3f", $1 / tx }' \
            "$state/perf.$target.txt"
        printf ' (%s transactions)\n' "$done_tx"
        # The same run's CPU time split: what the I/O style costs in the kernel against the
        # pooler's own work in user space (tick-based, so only a run of some seconds says much).
        awk -v u=$((user1 - user0)) -v s=$((system1 - system0)) -v hz="$(getconf CLK_TCK)" \
            -v tx="$done_tx" -v name="$target" -v c="$clients" -v p="$protocol" 'BEGIN {
            printf "%-10s %s clients, -M %s: CPU per transaction: user %.2f us, system %.2f us\n",
                name, c, p, u * 1e6 / hz / tx, s * 1e6 / hz / tx }'
    fi
done
