#!/usr/bin/env bash
# What TLS costs a pooler: pgbench through Debian's PgBouncer and through pgtether, each with
# sslmode=require (TLS between pgbench and the pooler) and with sslmode=disable (the same pooler,
# the same ini, plaintext), in one run on one throwaway PostgreSQL. Not a timed test; run it by
# hand and record the table in docs/benchmarks.md ("TLS").
#
# Both poolers get the SAME generated ini: pool_mode = transaction, default_pool_size = 20,
# client_tls_sslmode = prefer with the same key and certificate (prefer, so that one ini serves
# the TLS runs and the plaintext baseline: pgbench's sslmode decides), auth trust. With
# --server-tls the ini also has server_tls_sslmode = require (PostgreSQL runs with ssl = on
# anyway), so the TLS runs are encrypted on both hops. Runs alternate between targets round by
# round, each pooler freshly started for its run; the median over the rounds is reported. CPU
# time per transaction is the pooler's utime + stime over the run (/proc/<pid>/stat) divided by
# the transactions pgbench reports. "direct" is pgbench straight to PostgreSQL, with and without
# TLS, for reference.
#
# Two targets are several cores' worth (issue 16): `pgbouncer:2` is two PgBouncer processes on
# one port with so_reuseport = 1 and default_pool_size = 10 each (the same 20 backends in all;
# PgBouncer 1.18 has no [peers], so a cancel may land on the wrong process: pgbench sends none),
# and `pgtether:w2` is pgtether with workers = 2 (its pool limits are the process's: 20).
#
# `relay:pool` and `relay:pool:2` are the floor under them (tests/bench/relay_floor.cpp): a
# transaction pooler that does nothing else -- no client authentication, no protocol checks --
# with one loop or two (two threads on SO_REUSEPORT listeners, 10 backends each), terminating
# client TLS with OpenSSL on the socket. What any pooler on a readiness loop gets at best here.
#
# With --idle N it instead opens N idle clients to each pooler, over TLS and in plaintext
# (tests/bench/idle_clients.py --tls), and reports the pooler's resident memory per idle client.
set -euo pipefail

# shellcheck source=scripts/lib/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib/common.sh"
# shellcheck source=tests/bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

usage() {
    cat <<'USAGE'
usage: tests/bench/tls.sh [options]
  -T SECONDS            length of each pgbench run (default 15)
  -r ROUNDS             runs per target, mode and client count; the median is reported (default 3)
  -j THREADS            pgbench threads (default 2)
  --clients "10 50"     client counts (default "10 50")
  --protocol MODE       pgbench -M: simple, extended or prepared (default simple)
  --connect             a new connection per transaction (pgbench -C): the handshake's cost
  --server-tls          server_tls_sslmode = require as well (TLS on both hops)
  --scale N             pgbench -i scale (default 10)
  --targets "LIST"      any of: direct pgbouncer pgbouncer:2 pgtether pgtether:w2 relay:pool
                        relay:pool:2 (default "direct pgbouncer pgtether"; the :2 and :w2
                        targets run two processes, two workers or two loops, see above)
  --reference TARGET    tps and CPU ratios against this target (default pgbouncer:2 when it is
                        a target, else pgbouncer, else the first target)
  --pgtether PATH       pgtether binary (default build/proxy/pgtether)
  --pgbouncer PATH      pgbouncer binary (default: pgbouncer on PATH or /usr/sbin/pgbouncer)
  --idle N              idle-memory mode: N idle clients per pooler and mode instead of tps runs
  --breakdown           also report, per pooler run, the CPU per transaction of PostgreSQL, of
                        pgbench and of softirq work, and the idle and steal shares of the machine
  --keep                keep the state directory (ini, certificates, logs, pgbench output)
USAGE
    exit "${1:-2}"
}

duration=15
rounds=3
threads=2
clients_list="10 50"
protocol=simple
connect=0
server_tls=0
scale=10
targets="direct pgbouncer pgtether"
reference=""
keep=0
idle=0
breakdown=0
pgtether_bin="${PGT_BUILD_DIR:-$PGT_ROOT/build}/proxy/pgtether"
pgbouncer_bin="$(command -v pgbouncer || echo /usr/sbin/pgbouncer)"

while (($#)); do
    case "$1" in
    -T) duration="$2"; shift 2 ;;
    -r) rounds="$2"; shift 2 ;;
    -j) threads="$2"; shift 2 ;;
    --clients) clients_list="$2"; shift 2 ;;
    --protocol) protocol="$2"; shift 2 ;;
    --connect) connect=1; shift ;;
    --server-tls) server_tls=1; shift ;;
    --scale) scale="$2"; shift 2 ;;
    --targets) targets="$2"; shift 2 ;;
    --reference) reference="$2"; shift 2 ;;
    --breakdown) breakdown=1; shift ;;
    --pgtether) pgtether_bin="$2"; shift 2 ;;
    --pgbouncer) pgbouncer_bin="$2"; shift 2 ;;
    --idle) idle="$2"; shift 2 ;;
    --keep) keep=1; shift ;;
    -h | --help) usage 0 ;;
    *) usage ;;
    esac
done
[[ $duration =~ ^[1-9][0-9]*$ && $rounds =~ ^[1-9][0-9]*$ && $scale =~ ^[1-9][0-9]*$ ]] || usage
[[ $idle =~ ^[0-9]+$ ]] || usage
case "$protocol" in simple | extended | prepared) ;; *) usage ;; esac
for target in $targets; do
    case "$target" in
    direct | pgbouncer | pgbouncer:2 | pgtether | pgtether:w2 | relay:pool | relay:pool:2) ;;
    *) usage ;;
    esac
done
if [[ -z $reference ]]; then
    for candidate in pgbouncer:2 pgbouncer "${targets%% *}"; do
        if [[ " $targets " == *" $candidate "* ]]; then
            reference="$candidate"
            break
        fi
    done
fi
[[ " $targets " == *" $reference "* ]] || pgt_die "--reference $reference is not one of the targets"
max_clients=0
for c in $clients_list; do
    [[ $c =~ ^[1-9][0-9]*$ ]] || usage
    ((c > max_clients)) && max_clients=$c
done
command -v openssl >/dev/null || pgt_die "the openssl command is needed to make certificates"

# ---- state, cleanup ----
bench_make_state pgtether-tls-bench

clk_tck="$(getconf CLK_TCK)"
db=pgtether_bench
bench_raise_fd_limit $((idle + 200))

# ---- certificates: one CA, one certificate for PostgreSQL and both poolers ----
pgt_log "making a test CA and a server certificate (openssl)"
certs="$state/certs"
mkdir -p "$certs"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$certs/ca.key" \
    -out "$certs/ca.crt" -days 2 -subj "/CN=pgtether bench CA" >/dev/null 2>&1
openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
    -keyout "$certs/server.key" -out "$certs/server.csr" -subj "/CN=localhost" >/dev/null 2>&1
printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\n' >"$certs/server.ext"
openssl x509 -req -in "$certs/server.csr" -CA "$certs/ca.crt" -CAkey "$certs/ca.key" \
    -CAcreateserial -out "$certs/server.crt" -days 2 -extfile "$certs/server.ext" >/dev/null 2>&1
chmod 600 "$certs/server.key"

# ---- PostgreSQL (ssl = on, for the direct TLS reference and --server-tls) ----
pgt_log "starting a throwaway PostgreSQL with TLS, pgbench -i -s $scale"
"$PGT_ROOT/scripts/lib/pg.sh" start "$state/postgresql" --db "$db" --pgbench-scale "$scale" \
    --ssl "$certs" --max-connections $((max_clients + 100 > 300 ? max_clients + 100 : 300)) \
    >/dev/null
# shellcheck source=/dev/null
source "$state/postgresql/pg.env"
"$PGT_PG_BIN/psql" -X -q -h 127.0.0.1 -p "$PGT_PG_PORT" -U postgres -d "$db" -c "VACUUM ANALYZE"
postmaster_pid="$(head -n 1 "$PGT_PG_DATA/postmaster.pid")"  # for cluster_ticks

# ---- the one ini both poolers run with ----
pooler_port="$(pgt_free_port)"
server_tls_line=""
((server_tls)) && server_tls_line="server_tls_sslmode = require"
bench_write_ini "$state/bench.ini" tls.sh trust $(((idle > max_clients ? idle : max_clients) + 100))
cat >>"$state/bench.ini" <<INI
client_tls_sslmode = prefer
client_tls_key_file = $certs/server.key
client_tls_cert_file = $certs/server.crt
$server_tls_line
INI
printf '"postgres" ""\n' >"$state/userlist.txt"
# Two PgBouncer processes sharing the port and, between them, the 20 backends.
sed -e 's/^default_pool_size = .*/default_pool_size = 10/' "$state/bench.ini" >"$state/bench-pgbouncer-2.ini"
printf 'so_reuseport = 1\n' >>"$state/bench-pgbouncer-2.ini"
{
    cat "$state/bench.ini"
    printf 'workers = 2\n'
} >"$state/bench-pgtether-w2.ini"
bench_prepare_relays "$targets"
for target in $targets; do
    [[ $target == relay:* ]] || continue
    printf 'tls_cert = %s\ntls_key = %s\n' "$certs/server.crt" "$certs/server.key" \
        >>"$state/${target//:/-}.ini"
done
pgt_chown_daemon_user "$state"

pooler_bin() {
    case "$1" in
    pgbouncer*) printf '%s\n' "$pgbouncer_bin" ;;
    pgtether*) printf '%s\n' "$pgtether_bin" ;;
    relay:*) printf '%s\n' "$state/relay_floor" ;;
    esac
}

ini_of() {
    case "$1" in
    pgbouncer:2 | pgtether:w2) printf '%s\n' "$state/bench-${1//:/-}.ini" ;;
    relay:*) printf '%s\n' "$state/${1//:/-}.ini" ;;
    *) printf '%s\n' "$state/bench.ini" ;;
    esac
}

pooler_start() {
    bench_pooler_start "$1" "$(pooler_bin "$1")" "$(ini_of "$1")" || return 1
    if [[ $1 == pgbouncer:2 ]]; then
        bench_pooler_start_more "$1-second" "$pgbouncer_bin" "$(ini_of "$1")" "process up" || {
            pooler_stop
            return 1
        }
    fi
}

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
        for mode in tls plain; do
            pgt_log "$target: $idle idle $mode clients"
            pooler_start "$target" || continue
            # One client first, so the server connection exists before the baseline.
            PGSSLMODE=disable "$PGT_PG_BIN/psql" -X -q -h 127.0.0.1 -p "$pooler_port" -U postgres \
                -d "$db" -c "SELECT 1" >/dev/null
            sleep 0.5
            before="$(rss_kib "$pooler_pid")"
            tls_flag=()
            [[ $mode == tls ]] && tls_flag=(--tls)
            if bench_start_idle "$idle" "${tls_flag[@]}"; then
                sleep 1
                after="$(rss_kib "$pooler_pid")"
                idle_result[$target $mode]="$(((after - before) * 1024 / idle))"
                printf '  %s %s: VmRSS %s KiB -> %s KiB\n' "$target" "$mode" "$before" "$after"
            else
                pgt_warn "$target $mode: idle clients failed: ${idle_line:-timeout}"
            fi
            bench_stop_idle
            pooler_stop
        done
    done
    printf '\nIdle memory: %d idle clients per pooler and mode, resident memory (VmRSS) per client\n' "$idle"
    printf '%-12s | %18s | %18s\n' pooler "TLS (bytes)" "plaintext (bytes)"
    printf -- '-------------+--------------------+-------------------\n'
    for target in "${active[@]}"; do
        [[ $target == direct ]] && continue
        printf '%-12s | %18s | %18s\n' "$target" "${idle_result[$target tls]:-n/a}" \
            "${idle_result[$target plain]:-n/a}"
    done
    exit 0
fi

connect_flag=()
((connect)) && connect_flag=(-C)
declare -A tps_runs cpu_runs

run_pgbench() {  # target sslmode clients round -> sets run_tps, run_txns
    local target="$1" sslmode="$2" clients="$3" round="$4" port out
    port="$pooler_port"
    [[ $target == direct ]] && port="$PGT_PG_PORT"
    out="$state/pgbench-$target-$sslmode-c$clients-r$round.txt"
    run_tps=""
    run_txns=""
    if PGSSLMODE="$sslmode" PGGSSENCMODE=disable "$PGT_PG_BIN/pgbench" -n -h 127.0.0.1 \
        -p "$port" -U postgres -c "$clients" -j "$threads" -T "$duration" -M "$protocol" \
        "${connect_flag[@]}" -S "$db" >"$out" 2>&1; then
        run_tps="$(sed -n 's/^tps = \([0-9.]*\) .*/\1/p' "$out")"
        run_txns="$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' "$out")"
    fi
    if [[ -z $run_tps || -z $run_txns || $run_txns == 0 ]]; then
        pgt_warn "$target $sslmode, $clients clients: pgbench failed; the end of its output:"
        tail -n 5 "$out" | sed 's/^/  | /' >&2
        run_tps=""
        return 1
    fi
}

pgt_log "pgbench -S -M $protocol${connect_flag[*]:+ -C}, ${duration}s per run, $rounds round(s), clients: $clients_list"
for clients in $clients_list; do
    for ((round = 1; round <= rounds; round++)); do
        for target in "${active[@]}"; do
            for sslmode in require disable; do
                key="$target $sslmode $clients"
                if [[ $target == direct ]]; then
                    run_pgbench direct "$sslmode" "$clients" "$round" || continue
                    tps_runs[$key]+="$run_tps "
                    printf '  round %d/%d  %3d clients  %-9s %-8s %10.0f tps\n' "$round" \
                        "$rounds" "$clients" direct "$sslmode" "$run_tps"
                    continue
                fi
                pooler_start "$target" || continue
                t0="$(pooler_cpu_ticks)"
                m0="$(machine_ticks)" c0="$(cluster_ticks)" o0="$(own_children_ticks)"
                if run_pgbench "$target" "$sslmode" "$clients" "$round"; then
                    t1="$(pooler_cpu_ticks)"
                    m1="$(machine_ticks)" c1="$(cluster_ticks)" o1="$(own_children_ticks)"
                    us="$(awk -v d=$((t1 - t0)) -v hz="$clk_tck" -v n="$run_txns" \
                        'BEGIN { printf "%.2f", d * 1000000 / hz / n }')"
                    tps_runs[$key]+="$run_tps "
                    cpu_runs[$key]+="$us "
                    extra=""
                    ((breakdown == 0)) ||
                        extra="  $(breakdown_line "$m0" "$m1" $((c1 - c0)) $((o1 - o0)) "$run_txns")"
                    printf '  round %d/%d  %3d clients  %-11s %-8s %10.0f tps  %8s us CPU/txn%s\n' \
                        "$round" "$rounds" "$clients" "$target" "$sslmode" "$run_tps" "$us" "$extra"
                fi
                pooler_stop
            done
        done
    done
done


printf '\npgbench -S -M %s%s, %ss per run, median of %s round(s); pool_mode=transaction, default_pool_size=20, client TLS %s\n' \
    "$protocol" "${connect_flag[*]:+ -C}" "$duration" "$rounds" \
    "$( ((server_tls)) && echo "and server TLS (require)" || echo "only")"
printf '%7s | %-9s | %-12s | %10s | %10s | %9s | %9s\n' clients sslmode target tps "us/txn" \
    "tps /ref" "cpu /ref"
printf -- '--------+-----------+--------------+------------+------------+-----------+----------\n'
for clients in $clients_list; do
    for sslmode in require disable; do
        ref_tps="$(med "${tps_runs[$reference $sslmode $clients]:-}")"
        ref_cpu="$(med "${cpu_runs[$reference $sslmode $clients]:-}")"
        for target in "${active[@]}"; do
            t="$(med "${tps_runs[$target $sslmode $clients]:-}")"
            c="$(med "${cpu_runs[$target $sslmode $clients]:-}")"
            printf '%7s | %-9s | %-12s | %10s | %10s | %9s | %9s\n' "$clients" "$sslmode" \
                "$target" "$(fmt "$t")" "$(fmt "$c" 2)" "$(ratio "$t" "$ref_tps")" \
                "$(ratio "$c" "$ref_cpu")"
        done
    done
done
printf '(ratios against %s: tps /ref higher is better, CPU per transaction /ref lower is better;\n' "$reference"
printf ' pgbench shares the machine; the rounds are in the log above)\n'
for target in "${active[@]}"; do
    [[ $target == direct ]] && continue
    for clients in $clients_list; do
        r="$(med "${tps_runs[$target require $clients]:-}")"
        p="$(med "${tps_runs[$target disable $clients]:-}")"
        rc="$(med "${cpu_runs[$target require $clients]:-}")"
        pc="$(med "${cpu_runs[$target disable $clients]:-}")"
        if [[ -n $r && -n $p && -n $rc && -n $pc ]]; then
            printf 'TLS cost, %-11s %3s clients: tps x%s, CPU per transaction +%s us\n' "$target" \
                "$clients" "$(ratio "$r" "$p")" \
                "$(awk -v a="$rc" -v b="$pc" 'BEGIN { printf "%.2f", a - b }')"
        fi
    done
done
