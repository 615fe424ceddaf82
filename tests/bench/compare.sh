#!/usr/bin/env bash
# Side-by-side benchmark: pgbench against PostgreSQL directly, through Debian's PgBouncer and
# through pgtether, in one run, on one throwaway PostgreSQL (not a timed test; run it by hand).
#
# Both poolers get the SAME generated ini (pool_mode = transaction, default_pool_size = 20). Runs
# alternate between targets round by round (direct, pgbouncer, pgtether, direct, ...), each pooler
# freshly started for its run; the median over the rounds is reported. For the poolers, CPU time
# per transaction comes from /proc/<pid>/stat (utime + stime) over the run divided by the
# transactions pgbench reports. A pooler that does not start is skipped with a message.
#
# With --idle N it instead opens N idle client connections to each pooler (tests/bench/idle_clients.py)
# and reports the pooler's resident memory per client (VmRSS delta / N).
set -euo pipefail

# shellcheck source=scripts/lib/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib/common.sh"

usage() {
    cat <<'USAGE'
usage: tests/bench/compare.sh [options]
  -T SECONDS            length of each pgbench run (default 30)
  -r ROUNDS             runs per target and client count; the median is reported (default 3)
  -j THREADS            pgbench threads (default 2)
  --clients "20 200"    client counts (default "20 200")
  --protocol MODE       pgbench -M: simple, extended or prepared (default simple)
  --select-only         the built-in select-only script, pgbench -S (default)
  --script FILE[@W]     a custom pgbench script instead (pgbench -f; repeatable)
  --scale N             pgbench -i scale (default 10)
  --targets "LIST"      any of: direct pgbouncer pgtether (default all three)
  --auth TYPE           client auth at the poolers: trust, md5, scram-sha-256 (default md5)
  --idle N              idle-memory mode: N idle clients per pooler (e.g. 5000) instead of tps runs
  --pgtether PATH       pgtether binary (default build/proxy/pgtether)
  --pgbouncer PATH      pgbouncer binary (default: pgbouncer on PATH or /usr/sbin/pgbouncer)
  --keep                keep the state directory (ini, logs, pgbench output) for inspection
USAGE
    exit "${1:-2}"
}

duration=30
rounds=3
threads=2
clients_list="20 200"
protocol=simple
scripts=()
scale=10
targets="direct pgbouncer pgtether"
auth=md5
idle=0
keep=0
pgtether_bin="${PGT_BUILD_DIR:-$PGT_ROOT/build}/proxy/pgtether"
pgbouncer_bin="$(command -v pgbouncer || echo /usr/sbin/pgbouncer)"

while (($#)); do
    case "$1" in
    -T) duration="$2"; shift 2 ;;
    -r) rounds="$2"; shift 2 ;;
    -j) threads="$2"; shift 2 ;;
    --clients) clients_list="$2"; shift 2 ;;
    --protocol) protocol="$2"; shift 2 ;;
    --select-only) scripts=(); shift ;;
    --script) scripts+=("$2"); shift 2 ;;
    --scale) scale="$2"; shift 2 ;;
    --targets) targets="$2"; shift 2 ;;
    --auth) auth="$2"; shift 2 ;;
    --idle) idle="$2"; shift 2 ;;
    --pgtether) pgtether_bin="$2"; shift 2 ;;
    --pgbouncer) pgbouncer_bin="$2"; shift 2 ;;
    --keep) keep=1; shift ;;
    -h | --help) usage 0 ;;
    *) usage ;;
    esac
done
[[ $duration =~ ^[0-9]+$ && $rounds =~ ^[1-9][0-9]*$ && $scale =~ ^[1-9][0-9]*$ ]] || usage
[[ $idle =~ ^[0-9]+$ ]] || usage
case "$protocol" in simple | extended | prepared) ;; *) usage ;; esac
case "$auth" in trust | md5 | scram-sha-256) ;; *) usage ;; esac
for target in $targets; do
    case "$target" in direct | pgbouncer | pgtether) ;; *) usage ;; esac
done
workload=(-S)
if ((${#scripts[@]} > 0)); then
    workload=()
    for s in "${scripts[@]}"; do
        [[ -r ${s%@*} ]] || pgt_die "cannot read pgbench script ${s%@*}"
        workload+=(-f "$(realpath "${s%@*}")${s#"${s%@*}"}")
    done
fi
max_clients=0
for c in $clients_list; do
    [[ $c =~ ^[1-9][0-9]*$ ]] || usage
    ((c > max_clients)) && max_clients=$c
done

# ---- state, cleanup ----
state="$(mktemp -d /tmp/pgtether-bench.XXXXXX)"
touch "$state/.pgtether-bench"
pooler_pid=""
idle_pid=""
cleanup() {
    [[ -z $idle_pid ]] || { kill -TERM "$idle_pid" 2>/dev/null || true; wait "$idle_pid" 2>/dev/null || true; }
    [[ -z $pooler_pid ]] || pgt_stop_pid "$pooler_pid" 10
    "$PGT_ROOT/scripts/lib/pg.sh" stop "$state/postgresql" || true
    if ((keep)); then
        pgt_log "state kept in $state"
    else
        rm -rf -- "$state"
    fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# Thousands of sockets: the poolers and the idle helper inherit this limit.
hard_limit="$(ulimit -Hn)"
[[ $hard_limit == unlimited ]] && hard_limit=1048576
ulimit -n "$hard_limit"
if ((idle + 200 > hard_limit)); then
    pgt_die "--idle $idle needs more file descriptors than the hard limit $hard_limit"
fi

clk_tck="$(getconf CLK_TCK)"
db=pgtether_bench
password=bench-secret

# ---- PostgreSQL ----
pgt_log "starting a throwaway PostgreSQL, pgbench -i -s $scale"
"$PGT_ROOT/scripts/lib/pg.sh" start "$state/postgresql" --db "$db" --pgbench-scale "$scale" \
    --max-connections $((max_clients + 50 > 300 ? max_clients + 50 : 300)) >/dev/null
# shellcheck source=/dev/null
source "$state/postgresql/pg.env"
"$PGT_PG_BIN/psql" -X -q -h 127.0.0.1 -p "$PGT_PG_PORT" -U postgres -d "$db" -c "VACUUM ANALYZE"

# ---- the one ini both poolers run with ----
pooler_port="$(pgt_free_port)"
max_client_conn=$(((idle > max_clients ? idle : max_clients) + 100))
cat >"$state/bench.ini" <<INI
;; Generated by tests/bench/compare.sh; used unchanged by pgbouncer and pgtether.
[databases]
$db = host=127.0.0.1 port=$PGT_PG_PORT dbname=$db

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $pooler_port
unix_socket_dir =
auth_type = $auth
auth_file = $state/userlist.txt
admin_users = postgres
pool_mode = transaction
default_pool_size = 20
max_client_conn = $max_client_conn
ignore_startup_parameters = extra_float_digits
log_connections = 0
log_disconnections = 0
INI
printf '"postgres" "%s"\n' "$password" >"$state/userlist.txt"
pgt_chown_daemon_user "$state"
export PGPASSWORD="$password"  # ignored by PostgreSQL itself (trust), used by the poolers

pooler_bin() {
    case "$1" in
    pgbouncer) printf '%s\n' "$pgbouncer_bin" ;;
    pgtether) printf '%s\n' "$pgtether_bin" ;;
    esac
}

# Start pooler $1 with the shared ini; sets pooler_pid. On failure prints why and returns 1.
pooler_start() {
    local name="$1" bin log
    bin="$(pooler_bin "$name")"
    log="$state/$name.log"
    if [[ ! -x $bin ]]; then
        printf '%s: %s is not an executable\n' "$name" "$bin" >&2
        return 1
    fi
    pgt_spawn_daemon "$log" "$bin" "$state/bench.ini"
    pooler_pid="$PGT_SPAWNED_PID"
    if ! pgt_wait_for_port 127.0.0.1 "$pooler_port" 15 "$pooler_pid"; then
        printf '%s did not start; the end of its log:\n' "$name" >&2
        tail -n 15 "$log" | sed 's/^/  | /' >&2
        pgt_stop_pid "$pooler_pid" 5
        pooler_pid=""
        return 1
    fi
}

pooler_stop() {
    [[ -z $pooler_pid ]] || pgt_stop_pid "$pooler_pid" 10
    pooler_pid=""
}

# utime + stime of pid $1 in clock ticks (fields 14 and 15 of /proc/<pid>/stat, counted after the
# parenthesised command name, which may contain spaces).
cpu_ticks() {
    local rest
    rest="$(sed -E 's/^.*\) //' "/proc/$1/stat")"
    awk '{ print $12 + $13 }' <<<"$rest"
}

rss_kib() { awk '/^VmRSS:/ { print $2 }' "/proc/$1/status"; }

# median of the numbers on stdin ("" if none)
median() {
    sort -g | awk '{ v[NR] = $1 } END {
        if (NR == 0) exit
        if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

# Which targets can run at all: start each pooler once.
active=()
for target in $targets; do
    if [[ $target == direct ]]; then
        active+=(direct)
    elif pooler_start "$target"; then
        pooler_stop
        active+=("$target")
    else
        pgt_warn "skipping $target: it does not start with $state/bench.ini"
    fi
done

# ======================= idle-memory mode =======================
if ((idle > 0)); then
    declare -A idle_result
    for target in "${active[@]}"; do
        [[ $target == direct ]] && continue
        pgt_log "$target: $idle idle clients"
        pooler_start "$target" || { idle_result[$target]="fail"; continue; }
        # One client first, so the server connection and per-database state exist before the
        # baseline: the delta is then the cost of the idle clients alone.
        "$PGT_PG_BIN/psql" -X -q -h 127.0.0.1 -p "$pooler_port" -U postgres -d "$db" \
            -c "SELECT 1" >/dev/null
        sleep 0.5
        before="$(rss_kib "$pooler_pid")"
        coproc IDLE {
            exec /usr/bin/python3 "$PGT_ROOT/tests/bench/idle_clients.py" --port "$pooler_port" \
                --user postgres --dbname "$db" -n "$idle" 2>&1
        }
        # shellcheck disable=SC2153  # set by coproc
        idle_pid="$IDLE_PID"
        line=""
        IFS= read -r -t 300 line <&"${IDLE[0]}" || true
        if [[ $line != "READY $idle" ]]; then
            pgt_warn "$target: idle clients failed: ${line:-timeout}"
            idle_result[$target]="fail"
        else
            sleep 1
            after="$(rss_kib "$pooler_pid")"
            idle_result[$target]="$before $after $(((after - before) * 1024 / idle))"
            printf '  %s: VmRSS %s KiB -> %s KiB\n' "$target" "$before" "$after"
        fi
        kill -TERM "$idle_pid" 2>/dev/null || true
        wait "$idle_pid" 2>/dev/null || true
        idle_pid=""
        pooler_stop
    done

    printf '\nIdle memory: %d idle clients (auth %s), pooler resident memory (VmRSS)\n' "$idle" "$auth"
    printf '%-10s | %14s | %14s | %16s\n' pooler "before (KiB)" "idle (KiB)" "bytes per client"
    printf -- '-----------+----------------+----------------+-----------------\n'
    for target in pgbouncer pgtether; do
        read -r b a per <<<"${idle_result[$target]:-n/a n/a n/a}"
        [[ $b == fail ]] && { a=fail; per=fail; }
        printf '%-10s | %14s | %14s | %16s\n' "$target" "$b" "${a:-n/a}" "${per:-n/a}"
    done
    pgb="$(awk '{print $3}' <<<"${idle_result[pgbouncer]:-}")"
    pgt="$(awk '{print $3}' <<<"${idle_result[pgtether]:-}")"
    if [[ $pgb =~ ^[0-9]+$ && $pgt =~ ^[0-9]+$ && $pgb -gt 0 ]]; then
        printf 'pgtether/PgBouncer memory per client: %s\n' "$(awk -v t="$pgt" -v b="$pgb" 'BEGIN { printf "%.2f", t / b }')"
    fi
    exit 0
fi

# ======================= tps mode =======================
# Results: "<target> <clients>" -> space-separated per-round values.
declare -A tps_runs cpu_runs
what="${workload[*]}"
[[ $what == -S ]] && what="select-only (-S)"
pgt_log "pgbench $what -M $protocol, ${duration}s per run, $rounds round(s), clients: $clients_list"

run_pgbench() {  # target clients round -> sets run_tps, run_txns (empty on failure)
    local target="$1" clients="$2" round="$3" port out
    port="$pooler_port"
    [[ $target == direct ]] && port="$PGT_PG_PORT"
    out="$state/pgbench-$target-c$clients-r$round.txt"
    run_tps=""
    run_txns=""
    if "$PGT_PG_BIN/pgbench" -n -h 127.0.0.1 -p "$port" -U postgres -c "$clients" -j "$threads" \
        -T "$duration" -M "$protocol" "${workload[@]}" "$db" >"$out" 2>&1; then
        run_tps="$(sed -n 's/^tps = \([0-9.]*\) .*/\1/p' "$out")"
        run_txns="$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' "$out")"
        local failed
        failed="$(sed -n 's/^number of failed transactions: \([0-9]*\).*/\1/p' "$out")"
        if [[ -n $failed && $failed != 0 ]]; then
            run_tps=""
        fi
    fi
    if [[ -z $run_tps || -z $run_txns || $run_txns == 0 ]]; then
        pgt_warn "$target, $clients clients: pgbench failed; the end of its output:"
        tail -n 5 "$out" | sed 's/^/  | /' >&2
        run_tps=""
        return 1
    fi
}

for clients in $clients_list; do
    for ((round = 1; round <= rounds; round++)); do
        for target in "${active[@]}"; do
            key="$target $clients"
            if [[ $target == direct ]]; then
                run_pgbench direct "$clients" "$round" || continue
                tps_runs[$key]+="$run_tps "
                printf '  round %d/%d  %3d clients  %-9s  %10.0f tps\n' "$round" "$rounds" \
                    "$clients" direct "$run_tps"
                continue
            fi
            pooler_start "$target" || continue
            t0="$(cpu_ticks "$pooler_pid")"
            if run_pgbench "$target" "$clients" "$round"; then
                t1="$(cpu_ticks "$pooler_pid")"
                us="$(awk -v d=$((t1 - t0)) -v hz="$clk_tck" -v n="$run_txns" \
                    'BEGIN { printf "%.2f", d * 1000000 / hz / n }')"
                tps_runs[$key]+="$run_tps "
                cpu_runs[$key]+="$us "
                printf '  round %d/%d  %3d clients  %-9s  %10.0f tps  %8s us CPU/txn\n' "$round" \
                    "$rounds" "$clients" "$target" "$run_tps" "$us"
            fi
            pooler_stop
        done
    done
done

med() { tr ' ' '\n' <<<"${1:-}" | { grep . || true; } | median; }
fmt() { if [[ -n $1 ]]; then printf "%.${2:-0}f" "$1"; else printf 'n/a'; fi; }
ratio() { if [[ -n $1 && -n $2 ]]; then awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else printf "n/a" }'; else printf 'n/a'; fi; }

printf '\npgbench %s -M %s, %ss per run, median of %s round(s); pool_mode=transaction, default_pool_size=20, auth %s\n' \
    "$what" "$protocol" "$duration" "$rounds" "$auth"
printf '%7s | %10s | %10s | %10s | %10s | %10s | %9s | %9s\n' clients "direct" "pgbouncer" \
    "pgtether" "pgb us/txn" "pgt us/txn" "tps t/b" "cpu t/b"
printf -- '--------+------------+------------+------------+------------+------------+-----------+----------\n'
for clients in $clients_list; do
    d="$(med "${tps_runs[direct $clients]:-}")"
    b="$(med "${tps_runs[pgbouncer $clients]:-}")"
    t="$(med "${tps_runs[pgtether $clients]:-}")"
    bc="$(med "${cpu_runs[pgbouncer $clients]:-}")"
    tc="$(med "${cpu_runs[pgtether $clients]:-}")"
    printf '%7s | %10s | %10s | %10s | %10s | %10s | %9s | %9s\n' "$clients" "$(fmt "$d")" \
        "$(fmt "$b")" "$(fmt "$t")" "$(fmt "$bc" 2)" "$(fmt "$tc" 2)" "$(ratio "$t" "$b")" \
        "$(ratio "$tc" "$bc")"
done
printf '(tps t/b = pgtether tps / PgBouncer tps, higher is better; cpu t/b = pgtether CPU per\n'
printf ' transaction / PgBouncer CPU per transaction, lower is better; pgbench shares the machine)\n'
