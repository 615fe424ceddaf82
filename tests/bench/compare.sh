#!/usr/bin/env bash
# Side-by-side benchmark: pgbench against PostgreSQL directly, through Debian's PgBouncer and
# through pgtether, in one run, on one throwaway PostgreSQL (not a timed test; run it by hand).
# docs/benchmarks.md has the method, the machine and the results.
#
# Both poolers get the SAME generated ini (pool_mode = transaction, default_pool_size = 20);
# pgtether-only settings (--pgtether-set, the pgtether:MODE targets) go into a copy of it that only
# pgtether reads, because PgBouncer refuses unknown keys. Runs alternate between targets round by
# round (direct, pgbouncer, pgtether, direct, ...), each pooler freshly started for its run; the
# median over the rounds is reported.
#
# CPU: for the poolers, CPU time per transaction is utime + stime from /proc/<pid>/stat over the
# run divided by the transactions pgbench reports. (With tick-based accounting, network softirq
# work done in the pooler's context is not charged to it; it is not charged to PgBouncer either.)
# Noise: the machine is shared, so every run also measures the CPU time that was NOT spent by this
# benchmark (user + nice + system from /proc/stat, minus the pooler, the throwaway PostgreSQL and
# pgbench) as a percentage of the machine's capacity; a run above --max-noise is repeated up to
# --retries times and marked with '*' if it stays noisy.
#
# With --idle N it instead opens N idle client connections to each pooler (tests/bench/idle_clients.py)
# and reports the pooler's resident memory per client (VmRSS delta / N).
set -euo pipefail

# shellcheck source=scripts/lib/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib/common.sh"
# shellcheck source=tests/bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

usage() {
    cat <<'USAGE'
usage: tests/bench/compare.sh [options]
  -T SECONDS            length of each pgbench run (default 30)
  -r ROUNDS             runs per target and client count; the median is reported (default 3)
  -j THREADS            pgbench threads (default 2)
  --clients "20 200"    client counts (default "20 200")
  --protocol MODE       pgbench -M: simple, extended or prepared (default simple)
  --select-only         the built-in select-only script, pgbench -S (default)
  --script FILE[@W]     a custom pgbench script instead (pgbench -f; repeatable), e.g.
                        tests/bench/advisory_lock.sql
  --define NAME=VALUE   a pgbench variable for every client (pgbench -D; repeatable), e.g.
                        settings_done=1 for tests/bench/settings_replay.sql
  --define-for TARGET NAME=VALUE
                        the same for one target only, after the --define ones (repeatable); with
                        two targets of the same pooler it compares two workloads round by round,
                        e.g. --targets "pgtether pgtether:on" --define settings_done=1
                        --define-for pgtether:on settings_done=0
  --scale N             pgbench -i scale (default 10)
  --targets "LIST"      any of: direct pgbouncer pgbouncer:session pgbouncer124 pgtether pgtether:on
                        pgtether:off pgtether:every_transaction baseline
                        (pgbouncer = Debian 12's PgBouncer 1.18, pgbouncer124 = PgBouncer
                        1.24.1 built by tests/compat/pgbouncer_pytest.sh, both with the same ini;
                        pgtether:MODE = pgtether with advisory_lock_tracking = MODE;
                        pgbouncer:session = PgBouncer in session mode with one backend per
                        client, the setup lock users run today; baseline = the --baseline
                        binary with pgtether's ini), pgtether:discovery_on and
                        pgtether:discovery_off (advisory_lock_discovery = on / off),
                        pgtether:watch_on and pgtether:watch_off (the catalog watch every
                        second / none: advisory_lock_catalog_check_interval = 1 / 0),
                        relay:epoll and relay:uring (tests/bench/relay_floor.cpp: one server
                        connection per client, bytes copied both ways, nothing parsed -- the
                        floor under any pooler's CPU, with read/write per message or with
                        io_uring's batched submission; compare at as many clients as the pool
                        has backends, 1 or 20), relay:pool (the same program as a transaction
                        pooler that does nothing else: 20 shared backends, replies framed only
                        to find ReadyForQuery; relay:pool:N = N such loops on N threads and
                        SO_REUSEPORT listeners, the pool split between them); default "direct
                        pgbouncer pgtether"
  --reference TARGET    ratios are computed against this target (default pgbouncer when it is
                        a target, else the first target)
  --pgtether-set 'K = V'  an extra [pgbouncer] line for pgtether only (repeatable)
  --count-probes        report the tether's probes per transaction and the most clients
                        tethered at once (pgtether targets; sets stats_period = 1 for pgtether
                        and sums its per-second stats and tether log lines)
  --auth TYPE           client auth at the poolers: trust, md5, scram-sha-256 (default md5)
  --pin-pooler CPUS     run the pooler under taskset -c CPUS (e.g. 1)
  --pin-pgbench CPUS    run pgbench under taskset -c CPUS
  --pin-postgres CPUS   pin PostgreSQL (postmaster and every backend) to CPUS
  --max-noise PCT       foreign CPU (% of the machine) above which a run is repeated (default 5)
  --retries N           repeats of a noisy run (default 2)
  --wait-quiet SECONDS  before each run, wait up to this long for the machine to be quiet (busy
                        below --max-noise over 2 s with nothing of ours running; default 0)
  --csv FILE            also write every run as CSV
  --breakdown           also report, per run, the CPU per transaction of PostgreSQL (postmaster
                        and backends), of pgbench, and of the kernel's softirq work (loopback
                        TCP), and the share of the machine left idle: where a tps gap goes when
                        the pooler's own CPU per transaction is equal
  --idle N              idle-memory mode: N idle clients per pooler (e.g. 5000) instead of tps runs
  --idle-query SQL      in idle mode, each client runs this once before going idle
  --pgtether PATH       pgtether binary (default build/proxy/pgtether)
  --baseline PATH       another pgtether binary, the target "baseline" (e.g. a build of an older
                        commit, to measure one change round by round)
  --setup-sql FILE      SQL run once on the database after pgbench -i (tables a --script needs,
                        e.g. tests/bench/jobs_setup.sql, tests/bench/lock_wrappers.sql)
  --pgbouncer PATH      pgbouncer binary (default: pgbouncer on PATH or /usr/sbin/pgbouncer)
  --pgbouncer124 PATH   the binary of the target pgbouncer124 (default: the build left by
                        tests/compat/pgbouncer_pytest.sh, build/compat124/src/tree/pgbouncer)
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
defines=()
declare -A target_defines
scale=10
targets="direct pgbouncer pgtether"
reference=""
pgtether_set=()
count_probes=0
auth=md5
pin_pooler=""
pin_pgbench=""
pin_postgres=""
max_noise=5
retries=2
wait_quiet=0
csv=""
breakdown=0
idle=0
idle_query=""
keep=0
pgtether_bin="${PGT_BUILD_DIR:-$PGT_ROOT/build}/proxy/pgtether"
baseline_bin=""
setup_sql=""
pgbouncer_bin="$(command -v pgbouncer || echo /usr/sbin/pgbouncer)"
pgbouncer124_bin="${PGT_BUILD_DIR:-$PGT_ROOT/build}/compat124/src/tree/pgbouncer"

while (($#)); do
    case "$1" in
    -T) duration="$2"; shift 2 ;;
    -r) rounds="$2"; shift 2 ;;
    -j) threads="$2"; shift 2 ;;
    --clients) clients_list="$2"; shift 2 ;;
    --protocol) protocol="$2"; shift 2 ;;
    --select-only) scripts=(); shift ;;
    --script) scripts+=("$2"); shift 2 ;;
    --define) defines+=(-D "$2"); shift 2 ;;
    --define-for) target_defines[$2]+="$3 "; shift 3 ;;
    --scale) scale="$2"; shift 2 ;;
    --targets) targets="$2"; shift 2 ;;
    --reference) reference="$2"; shift 2 ;;
    --pgtether-set) pgtether_set+=("$2"); shift 2 ;;
    --count-probes) count_probes=1; shift ;;
    --auth) auth="$2"; shift 2 ;;
    --pin-pooler) pin_pooler="$2"; shift 2 ;;
    --pin-pgbench) pin_pgbench="$2"; shift 2 ;;
    --pin-postgres) pin_postgres="$2"; shift 2 ;;
    --max-noise) max_noise="$2"; shift 2 ;;
    --retries) retries="$2"; shift 2 ;;
    --wait-quiet) wait_quiet="$2"; shift 2 ;;
    --csv) csv="$2"; shift 2 ;;
    --breakdown) breakdown=1; shift ;;
    --idle) idle="$2"; shift 2 ;;
    --idle-query) idle_query="$2"; shift 2 ;;
    --pgtether) pgtether_bin="$2"; shift 2 ;;
    --baseline) baseline_bin="$2"; shift 2 ;;
    --setup-sql) setup_sql="$2"; shift 2 ;;
    --pgbouncer) pgbouncer_bin="$2"; shift 2 ;;
    --pgbouncer124) pgbouncer124_bin="$2"; shift 2 ;;
    --keep) keep=1; shift ;;
    -h | --help) usage 0 ;;
    *) usage ;;
    esac
done
[[ $duration =~ ^[0-9]+$ && $rounds =~ ^[1-9][0-9]*$ && $scale =~ ^[1-9][0-9]*$ ]] || usage
[[ $idle =~ ^[0-9]+$ && $retries =~ ^[0-9]+$ && $max_noise =~ ^[0-9]+(\.[0-9]+)?$ ]] || usage
[[ $wait_quiet =~ ^[0-9]+$ ]] || usage
case "$protocol" in simple | extended | prepared) ;; *) usage ;; esac
case "$auth" in trust | md5 | scram-sha-256) ;; *) usage ;; esac
for cpus in "$pin_pooler" "$pin_pgbench" "$pin_postgres"; do
    [[ -z $cpus || $cpus =~ ^[0-9]+([,-][0-9]+)*$ ]] || usage
done
for target in $targets; do
    case "$target" in
    direct | pgbouncer | pgbouncer:session | pgtether | pgtether:on | pgtether:off) ;;
    pgbouncer124)
        [[ -x $pgbouncer124_bin ]] ||
            pgt_die "no PgBouncer 1.24.1 at $pgbouncer124_bin (run tests/compat/pgbouncer_pytest.sh --reference once, or pass --pgbouncer124 PATH)"
        ;;
    pgtether:every_transaction | pgtether:discovery_on | pgtether:discovery_off) ;;
    pgtether:watch_on | pgtether:watch_off) ;;
    baseline) [[ -x ${baseline_bin:-} ]] || pgt_die "the target baseline needs --baseline PATH" ;;
    relay:epoll | relay:uring | relay:pool | relay:pool:[1-9]) ;;
    *) usage ;;
    esac
done
if [[ -z $reference ]]; then
    if [[ " $targets " == *" pgbouncer "* ]]; then reference=pgbouncer; else reference="${targets%% *}"; fi
fi
[[ " $targets " == *" $reference "* ]] || pgt_die "--reference $reference is not one of the targets"
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
bench_make_state pgtether-bench

bench_raise_fd_limit $((idle + 200))

clk_tck="$(getconf CLK_TCK)"
db=pgtether_bench
password=bench-secret

# ---- PostgreSQL ----
pgt_log "starting a throwaway PostgreSQL, pgbench -i -s $scale"
"$PGT_ROOT/scripts/lib/pg.sh" start "$state/postgresql" --db "$db" --pgbench-scale "$scale" \
    --max-connections $((max_clients + 50 > 300 ? max_clients + 50 : 300)) >/dev/null
# shellcheck source=/dev/null
source "$state/postgresql/pg.env"
if [[ -n $setup_sql ]]; then
    "$PGT_PG_BIN/psql" -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$PGT_PG_PORT" -U postgres \
        -d "$db" -f "$setup_sql" >/dev/null
fi
"$PGT_PG_BIN/psql" -X -q -h 127.0.0.1 -p "$PGT_PG_PORT" -U postgres -d "$db" -c "VACUUM ANALYZE"
postmaster_pid="$(head -n 1 "$PGT_PG_DATA/postmaster.pid")"
if [[ -n $pin_postgres ]]; then
    # -a: every thread of every existing process; backends forked later inherit the mask.
    for pid in $postmaster_pid $(pgrep -P "$postmaster_pid"); do
        taskset -a -p -c "$pin_postgres" "$pid" >/dev/null
    done
fi

# ---- the one ini both poolers run with ----
pooler_port="$(pgt_free_port)"
max_client_conn=$(((idle > max_clients ? idle : max_clients) + 100))
bench_write_ini "$state/pgbouncer.ini" compare.sh "$auth" "$max_client_conn"
printf '"postgres" "%s"\n' "$password" >"$state/userlist.txt"

# The ini of a target: PgBouncer's own, or a copy with pgtether's extra lines.
ini_of() {
    case "$1" in
    pgbouncer | pgbouncer124) printf '%s\n' "$state/pgbouncer.ini" ;;
    *) printf '%s\n' "$state/${1//:/-}.ini" ;;
    esac
}
# PgBouncer in session mode: a backend for every client (what session locks need there).
sed -e 's/^pool_mode = .*/pool_mode = session/' \
    -e "s/^default_pool_size = .*/default_pool_size = $max_clients/" \
    "$state/pgbouncer.ini" >"$(ini_of pgbouncer:session)"
bench_prepare_relays "$targets"
for target in $targets; do
    [[ $target == pgtether* || $target == baseline ]] || continue
    ini="$(ini_of "$target")"
    {
        cat "$state/pgbouncer.ini"
        printf ';; pgtether only\n'
        for line in "${pgtether_set[@]}"; do printf '%s\n' "$line"; done
        case "$target" in
        pgtether:discovery_on) printf 'advisory_lock_discovery = on\n' ;;
        pgtether:discovery_off) printf 'advisory_lock_discovery = off\n' ;;
        pgtether:watch_on) printf 'advisory_lock_catalog_check_interval = 1\n' ;;
        pgtether:watch_off) printf 'advisory_lock_catalog_check_interval = 0\n' ;;
        pgtether:*) printf 'advisory_lock_tracking = %s\n' "${target#pgtether:}" ;;
        esac
        if ((count_probes)); then printf 'stats_period = 1\n'; fi
    } >"$ini"
done
pgt_chown_daemon_user "$state"
export PGPASSWORD="$password"  # ignored by PostgreSQL itself (trust), used by the poolers

pooler_bin() {
    case "$1" in
    pgbouncer124) printf '%s\n' "$pgbouncer124_bin" ;;
    pgbouncer*) printf '%s\n' "$pgbouncer_bin" ;;
    pgtether*) printf '%s\n' "$pgtether_bin" ;;
    baseline) printf '%s\n' "$baseline_bin" ;;
    relay:*) printf '%s\n' "$state/relay_floor" ;;
    esac
}

pooler_start() { bench_pooler_start "$1" "$(pooler_bin "$1")" "$(ini_of "$1")"; }

load1() { cut -d' ' -f1 /proc/loadavg; }

# Between runs nothing of ours is busy: wait (up to --wait-quiet seconds) until the rest of the
# machine is below --max-noise too, measured over 2 s.
wait_for_quiet() {
    ((wait_quiet > 0)) || return 0
    local deadline=$((SECONDS + wait_quiet)) m0 m1 quiet waited=0
    while :; do
        m0="$(machine_ticks)"
        sleep 2
        m1="$(machine_ticks)"
        quiet="$(awk -v m0="$m0" -v m1="$m1" -v max="$max_noise" 'BEGIN {
            split(m0, a, " "); split(m1, b, " "); all = b[2] - a[2]
            print (all > 0 && 100 * (b[1] - a[1]) / all > max) ? 0 : 1 }')"
        ((quiet)) && break
        if ((SECONDS >= deadline)); then
            pgt_warn "the machine stayed busy for ${wait_quiet}s; running anyway"
            break
        fi
        waited=1
    done
    if ((waited)); then pgt_log "waited $((SECONDS - deadline + wait_quiet))s for a quiet machine"; fi
}


# ---- what we run on ----
pgt_log "machine: $(nproc) CPUs ($(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)), $(awk '/^MemTotal/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo), kernel $(uname -r), load $(cut -d' ' -f1-3 /proc/loadavg)"
pgbouncer124_version=""
if [[ " $targets " == *" pgbouncer124 "* ]]; then
    pgbouncer124_version=" $("$pgbouncer124_bin" -V 2>/dev/null | head -n 1) (pgbouncer124),"
fi
pgt_log "versions: $("$PGT_PG_BIN/postgres" -V), $("$PGT_PG_BIN/pgbench" -V), $("$pgbouncer_bin" -V 2>/dev/null | head -n 1 || echo 'pgbouncer ?'),$pgbouncer124_version $("$pgtether_bin" -V 2>/dev/null | head -n 1 || echo 'pgtether ?')"
pinning="pooler ${pin_pooler:-any CPU}, pgbench ${pin_pgbench:-any CPU}, PostgreSQL ${pin_postgres:-any CPU}"
pgt_log "pinning: $pinning"

# Which targets can run at all: start each pooler once.
active=()
for target in $targets; do
    if [[ $target == direct ]]; then
        active+=(direct)
    elif pooler_start "$target"; then
        pooler_stop
        active+=("$target")
    else
        pgt_warn "skipping $target: it does not start with $(ini_of "$target")"
    fi
done

# ======================= idle-memory mode =======================
if ((idle > 0)); then
    declare -A idle_result
    idle_args=()
    [[ -z $idle_query ]] || idle_args=(--query "$idle_query")
    for target in "${active[@]}"; do
        [[ $target == direct ]] && continue
        pgt_log "$target: $idle idle clients${idle_query:+ (each ran: $idle_query)}"
        pooler_start "$target" || { idle_result[$target]="fail"; continue; }
        # One client first, so the server connection and per-database state exist before the
        # baseline: the delta is then the cost of the idle clients alone.
        "$PGT_PG_BIN/psql" -X -q -h 127.0.0.1 -p "$pooler_port" -U postgres -d "$db" \
            -c "SELECT 1" >/dev/null
        sleep 0.5
        before="$(rss_kib "$pooler_pid")"
        if ! bench_start_idle "$idle" "${idle_args[@]}"; then
            pgt_warn "$target: idle clients failed: ${idle_line:-timeout}"
            idle_result[$target]="fail"
        else
            sleep 1
            after="$(rss_kib "$pooler_pid")"
            idle_result[$target]="$before $after $(((after - before) * 1024 / idle))"
            printf '  %s: VmRSS %s KiB -> %s KiB\n' "$target" "$before" "$after"
        fi
        bench_stop_idle
        pooler_stop
    done

    printf '\nIdle memory: %d idle clients (auth %s%s), pooler resident memory (VmRSS)\n' "$idle" \
        "$auth" "${idle_query:+; each ran one query first}"
    printf '%-27s | %14s | %14s | %16s\n' pooler "before (KiB)" "idle (KiB)" "bytes per client"
    printf -- '----------------------------+----------------+----------------+-----------------\n'
    for target in "${active[@]}"; do
        [[ $target == direct ]] && continue
        read -r b a per <<<"${idle_result[$target]:-n/a n/a n/a}"
        [[ $b == fail ]] && { a=fail; per=fail; }
        printf '%-27s | %14s | %14s | %16s\n' "$target" "$b" "${a:-n/a}" "${per:-n/a}"
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
declare -A tps_runs cpu_runs probe_runs tethered_runs noisy_runs
what="${workload[*]}"
[[ $what == -S ]] && what="select-only (-S)"
if ((${#scripts[@]} > 0)); then
    what="script $(basename "${scripts[0]%@*}")"
    if ((${#scripts[@]} > 1)); then what+=" +$((${#scripts[@]} - 1))"; fi
fi
pgt_log "pgbench $what -M $protocol, ${duration}s per run, $rounds round(s), clients: $clients_list"
[[ -z $csv ]] || echo "clients,round,target,attempt,tps,transactions,cpu_us_per_txn,noise_pct,load1,probes_per_txn,tethered_max" >"$csv"

run_pgbench() {  # target clients round -> sets run_tps, run_txns (empty on failure)
    local target="$1" clients="$2" round="$3" port out pin=() own_defines=() d
    for d in ${target_defines[$target]:-}; do own_defines+=(-D "$d"); done
    port="$pooler_port"
    [[ $target == direct ]] && port="$PGT_PG_PORT"
    [[ -z $pin_pgbench ]] || pin=(taskset -c "$pin_pgbench")
    out="$state/pgbench-${target//:/-}-c$clients-r$round.txt"
    run_tps=""
    run_txns=""
    if "${pin[@]}" "$PGT_PG_BIN/pgbench" -n -h 127.0.0.1 -p "$port" -U postgres -c "$clients" \
        -j "$threads" -T "$duration" -M "$protocol" "${defines[@]}" "${own_defines[@]}" "${workload[@]}" "$db" >"$out" 2>&1; then
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

# One measured run of target $1 with $2 clients (round $3); sets run_tps, run_cpu (pooler
# microseconds per transaction, empty for direct), run_noise (% of the machine), run_load,
# run_probes (probes per transaction, empty unless counted). Returns 1 on failure.
measure() {
    local target="$1" clients="$2" round="$3" p0=0 p1=0 c0 c1 o0 o1 m0 m1
    run_cpu=""
    run_probes=""
    run_tethered=""
    if [[ $target != direct ]]; then
        pooler_start "$target" || return 1
    fi
    run_load="$(load1)"
    [[ -z $pooler_pid ]] || p0="$(cpu_ticks "$pooler_pid")"
    c0="$(cluster_ticks)"
    o0="$(own_children_ticks)"
    m0="$(machine_ticks)"
    if ! run_pgbench "$target" "$clients" "$round"; then
        pooler_stop
        return 1
    fi
    m1="$(machine_ticks)"
    [[ -z $pooler_pid ]] || p1="$(cpu_ticks "$pooler_pid")"
    c1="$(cluster_ticks)"
    o1="$(own_children_ticks)"
    run_noise="$(awk -v m0="$m0" -v m1="$m1" -v ours=$((p1 - p0 + c1 - c0 + o1 - o0)) 'BEGIN {
        split(m0, a, " "); split(m1, b, " ")
        busy = b[1] - a[1]; all = b[2] - a[2]
        foreign = busy - ours; if (foreign < 0) foreign = 0
        printf "%.1f", (all > 0) ? 100 * foreign / all : 0 }')"
    run_breakdown=""
    ((breakdown == 0)) || run_breakdown="$(breakdown_line "$m0" "$m1" $((c1 - c0)) $((o1 - o0)) "$run_txns")"
    if [[ -n $pooler_pid ]]; then
        run_cpu="$(awk -v d=$((p1 - p0)) -v hz="$clk_tck" -v n="$run_txns" \
            'BEGIN { printf "%.2f", d * 1000000 / hz / n }')"
        if ((count_probes)) && [[ $target == pgtether* || $target == baseline ]]; then
            # With stats_period = 1 pgtether logs, every second, that second's transactions
            # ("stats: N xacts/s") and its tether's counters ("tether: T tethered clients; in the
            # last period ... P probes"): probes per transaction is the sum of P over the sum of N;
            # T's maximum is the most clients tethered at once. Wait for the last period's lines.
            sleep 1.3
            read -r run_probes run_tethered < <(grep -F "[$pooler_pid]" "$state/${target//:/-}.log" | awk '
                / stats: / { for (i = 1; i < NF; i++) if ($(i + 1) == "xacts/s,") x += $i }
                / tether: / {
                    for (i = 1; i < NF; i++) {
                        if ($(i + 1) == "probes,") p += $i
                        if ($(i + 1) == "tethered" && $(i + 2) == "clients;" && $i > t) t = $i
                    }
                }
                END { if (x > 0) printf "%.3f %d\n", p / x, t; else print "" }') || true
        fi
    fi
    pooler_stop
}

for clients in $clients_list; do
    for ((round = 1; round <= rounds; round++)); do
        for target in "${active[@]}"; do
            key="$target $clients"
            for ((attempt = 1; ; attempt++)); do
                wait_for_quiet
                measure "$target" "$clients" "$round" || break
                noisy=$(awk -v n="$run_noise" -v m="$max_noise" 'BEGIN { print (n > m) ? 1 : 0 }')
                printf '  round %d/%d  %3d clients  %-27s %9.0f tps  %8s us CPU/txn  noise %5s%%  load %s%s%s%s\n' \
                    "$round" "$rounds" "$clients" "$target" "$run_tps" "${run_cpu:--}" "$run_noise" \
                    "$run_load" "${run_probes:+  probes/txn $run_probes  tethered max ${run_tethered:-0}}" \
                    "${run_breakdown:+  $run_breakdown}" \
                    "$( ((noisy)) && echo "  (noisy)")"
                [[ -z $csv ]] || echo "$clients,$round,$target,$attempt,$run_tps,$run_txns,$run_cpu,$run_noise,$run_load,$run_probes,$run_tethered" >>"$csv"
                if ((noisy && attempt <= retries)); then
                    continue
                fi
                tps_runs[$key]+="$run_tps "
                [[ -z $run_cpu ]] || cpu_runs[$key]+="$run_cpu "
                [[ -z $run_probes ]] || probe_runs[$key]+="$run_probes "
                [[ -z $run_tethered ]] || tethered_runs[$key]+="$run_tethered "
                if ((noisy)); then noisy_runs[$key]=$((${noisy_runs[$key]:-0} + 1)); fi
                break
            done
        done
    done
done


printf '\npgbench %s -M %s, %ss per run, median of %s round(s); pool_mode=transaction, default_pool_size=20, auth %s\n' \
    "$what" "$protocol" "$duration" "$rounds" "$auth"
printf 'pinning: %s; runs with more than %s%% foreign CPU were repeated up to %s times\n' "$pinning" \
    "$max_noise" "$retries"
printf '%-27s | %7s | %9s | %10s | %9s | %9s | %8s | %8s | %s\n' target clients tps "us CPU/txn" \
    "tps/ref" "cpu/ref" "probes" "tethered" "noisy runs kept"
printf -- '----------------------------+---------+-----------+------------+-----------+-----------+----------+----------+----------------\n'
for clients in $clients_list; do
    rt="$(med "${tps_runs[$reference $clients]:-}")"
    rc="$(med "${cpu_runs[$reference $clients]:-}")"
    for target in "${active[@]}"; do
        key="$target $clients"
        t="$(med "${tps_runs[$key]:-}")"
        c="$(med "${cpu_runs[$key]:-}")"
        p="$(med "${probe_runs[$key]:-}")"
        tm="$(tr ' ' '\n' <<<"${tethered_runs[$key]:-}" | { grep . || true; } | sort -n | tail -n 1)"
        printf '%-27s | %7s | %9s | %10s | %9s | %9s | %8s | %8s | %s\n' "$target" "$clients" "$(fmt "$t")" \
            "$(fmt "$c" 2)" "$(ratio "$t" "$rt")" "$(ratio "$c" "$rc")" "$(fmt "$p" 3)" "${tm:-n/a}" \
            "${noisy_runs[$key]:-0}"
    done
done
printf '(reference: %s. tps/ref higher is better; cpu/ref = pooler CPU per transaction relative to\n' "$reference"
printf ' the reference, lower is better; probes = tether probes per transaction; tethered = most\n'
printf ' clients tethered at once, over all rounds; pgbench, PostgreSQL\n'
printf ' and the pooler share the machine)\n'
