#!/usr/bin/env bash
# Many idle clients next to a few busy ones (issue 14, item 8); not a timed test, run it by hand.
# docs/benchmarks.md ("10,000 idle clients") has the method and the results.
#
# For each pooler (Debian's PgBouncer and pgtether, the same generated ini, transaction pooling,
# default_pool_size = 20, md5) and each round:
#   1. without idle clients: pgbench -S with --active clients for -T seconds (tps, p99 latency
#      from pgbench's per-transaction log);
#   2. --idle clients log in and stay idle (tests/bench/idle_clients.py): the pooler's VmRSS
#      growth divided by their number is the memory per idle client;
#   3. the same pgbench run with the idle clients still connected;
#   4. max_client_conn (= idle + active) is full again: one more client must be refused with
#      PgBouncer's error ("no more connections allowed (max_client_conn)").
# The file-descriptor limit is raised to the hard limit first; poolers and helpers inherit it.
set -euo pipefail

# shellcheck source=scripts/lib/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib/common.sh"
# shellcheck source=tests/bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

usage() {
    cat <<'USAGE'
usage: tests/bench/scale.sh [options]
  --idle N          idle clients (default 10000)
  --active N        pgbench clients (default 200)
  -T SECONDS        length of each pgbench run (default 20)
  -r ROUNDS         rounds per pooler; medians are reported (default 2)
  -j THREADS        pgbench threads (default 2)
  --scale N         pgbench -i scale (default 10)
  --targets "LIST"  pgbouncer and/or pgtether (default "pgbouncer pgtether")
  --pgtether PATH   pgtether binary (default build/proxy/pgtether)
  --pgbouncer PATH  pgbouncer binary (default: pgbouncer on PATH or /usr/sbin/pgbouncer)
  --keep            keep the state directory (ini, logs, pgbench logs)
USAGE
    exit "${1:-2}"
}

idle=10000
active=200
duration=20
rounds=2
threads=2
scale=10
targets="pgbouncer pgtether"
keep=0
pgtether_bin="${PGT_BUILD_DIR:-$PGT_ROOT/build}/proxy/pgtether"
pgbouncer_bin="$(command -v pgbouncer || echo /usr/sbin/pgbouncer)"
while (($#)); do
    case "$1" in
    --idle) idle="$2"; shift 2 ;;
    --active) active="$2"; shift 2 ;;
    -T) duration="$2"; shift 2 ;;
    -r) rounds="$2"; shift 2 ;;
    -j) threads="$2"; shift 2 ;;
    --scale) scale="$2"; shift 2 ;;
    --targets) targets="$2"; shift 2 ;;
    --pgtether) pgtether_bin="$2"; shift 2 ;;
    --pgbouncer) pgbouncer_bin="$2"; shift 2 ;;
    --keep) keep=1; shift ;;
    -h | --help) usage 0 ;;
    *) usage ;;
    esac
done
for n in "$idle" "$active" "$duration" "$rounds" "$threads" "$scale"; do
    [[ $n =~ ^[1-9][0-9]*$ ]] || usage
done
for target in $targets; do
    case "$target" in pgbouncer | pgtether) ;; *) usage ;; esac
done

bench_make_state pgtether-scale

bench_raise_fd_limit $((idle + active + 200))

db=pgtether_bench
password=bench-secret
pgt_log "starting a throwaway PostgreSQL, pgbench -i -s $scale"
"$PGT_ROOT/scripts/lib/pg.sh" start "$state/postgresql" --db "$db" --pgbench-scale "$scale" \
    >/dev/null
# shellcheck source=/dev/null
source "$state/postgresql/pg.env"
"$PGT_PG_BIN/psql" -X -q -h 127.0.0.1 -p "$PGT_PG_PORT" -U postgres -d "$db" -c "VACUUM ANALYZE"

pooler_port="$(pgt_free_port)"
max_client_conn=$((idle + active))
bench_write_ini "$state/pgbouncer.ini" scale.sh md5 "$max_client_conn"
printf '"postgres" "%s"\n' "$password" >"$state/userlist.txt"
pgt_chown_daemon_user "$state"
export PGPASSWORD="$password"

pooler_bin() { if [[ $1 == pgbouncer ]]; then printf '%s\n' "$pgbouncer_bin"; else printf '%s\n' "$pgtether_bin"; fi; }

pgt_log "machine: $(nproc) CPUs, $(awk '/^MemTotal/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo), kernel $(uname -r), load $(cut -d' ' -f1-3 /proc/loadavg), fd limit $hard_limit"
pgt_log "versions: $("$PGT_PG_BIN/postgres" -V), $("$pgbouncer_bin" -V 2>/dev/null | head -n 1 || echo 'pgbouncer ?'), $("$pgtether_bin" -V 2>/dev/null | head -n 1 || echo 'pgtether ?')"

# run_pgbench NAME -> "tps p99_ms" (p99 of the per-transaction latencies pgbench logged)
run_pgbench() {
    local name="$1" out tps
    rm -f "$state/$name".*
    out="$("$PGT_PG_BIN/pgbench" -h 127.0.0.1 -p "$pooler_port" -U postgres -n -S -M simple \
        -c "$active" -j "$threads" -T "$duration" -l --log-prefix="$state/$name" "$db" 2>&1)" || {
        printf 'fail fail\n'
        printf '%s\n' "$out" | tail -n 5 >&2
        return
    }
    tps="$(sed -nE 's/^tps = ([0-9.]+) .*/\1/p' <<<"$out" | tail -n 1)"
    # Log lines: client_id transaction_no latency_us script_no epoch_s epoch_us.
    local p99
    p99="$(cat "$state/$name".* | awk '{ print $3 }' | sort -n |
        awk '{ v[NR] = $1 } END { if (NR) printf "%.2f", v[int(NR * 0.99 + 0.5)] / 1000 }')"
    rm -f "$state/$name".*
    printf '%s %s\n' "${tps:-fail}" "${p99:-fail}"
}

declare -A tps_alone p99_alone tps_idle p99_idle per_client refused
for ((round = 1; round <= rounds; round++)); do
    for target in $targets; do
        pgt_log "round $round: $target"
        bench_pooler_start "$target" "$(pooler_bin "$target")" "$state/pgbouncer.ini" ||
            pgt_die "$target does not start"
        read -r t p <<<"$(run_pgbench "$target-alone")"
        tps_alone[$target]+="$t "
        p99_alone[$target]+="$p "
        pgt_log "  $active active alone: tps $t, p99 $p ms"

        sleep 1
        before="$(rss_kib "$pooler_pid")"
        if bench_start_idle "$idle"; then
            sleep 2
            after="$(rss_kib "$pooler_pid")"
            per=$(((after - before) * 1024 / idle))
            per_client[$target]+="$per "
            pgt_log "  $idle idle: VmRSS $before -> $after KiB, $per bytes per idle client"
            read -r t p <<<"$(run_pgbench "$target-with-idle")"
            tps_idle[$target]+="$t "
            p99_idle[$target]+="$p "
            pgt_log "  $active active beside $idle idle: tps $t, p99 $p ms"
            # max_client_conn is idle + active: of active + 1 more clients the last is refused.
            # (stdin at EOF: this helper lets its clients go as soon as it has reported.)
            line="$(/usr/bin/python3 "$PGT_ROOT/tests/bench/idle_clients.py" --port "$pooler_port" \
                --user postgres --dbname "$db" -n $((active + 1)) </dev/null 2>&1 | head -n 1 || true)"
            case "$line" in
            "FAILED $active "*) refused[$target]="refused: ${line#FAILED "$active" }" ;;
            *) refused[$target]="not refused as expected: $line" ;;
            esac
            pgt_log "  client $((idle + active + 1)): ${refused[$target]}"
        else
            pgt_warn "$target: idle clients failed: ${idle_line:-timeout}"
        fi
        bench_stop_idle
        pooler_stop
    done
done

printf '\n%d idle clients beside %d active (pgbench -S -c %d, %d s, %d round(s), medians)\n' \
    "$idle" "$active" "$active" "$duration" "$rounds"
printf '%-10s | %12s | %12s | %12s | %12s | %10s | %10s\n' pooler "tps alone" "tps + idle" \
    "p99 alone" "p99 + idle" "tps change" "B/idle"
printf -- '-----------+--------------+--------------+--------------+--------------+------------+-----------\n'
for target in $targets; do
    ta="$(med "${tps_alone[$target]:-}")"
    ti="$(med "${tps_idle[$target]:-}")"
    change="n/a"
    if [[ -n $ta && -n $ti ]]; then
        change="$(awk -v a="$ta" -v b="$ti" 'BEGIN { if (a > 0) printf "%+.1f%%", 100 * (b - a) / a }')"
    fi
    printf '%-10s | %12s | %12s | %9s ms | %9s ms | %10s | %10s\n' "$target" "$(fmt "$ta")" \
        "$(fmt "$ti")" "$(fmt "$(med "${p99_alone[$target]:-}")" 2)" \
        "$(fmt "$(med "${p99_idle[$target]:-}")" 2)" "$change" \
        "$(fmt "$(med "${per_client[$target]:-}")")"
done
for target in $targets; do
    printf '%s, client number %d: %s\n' "$target" $((idle + active + 1)) "${refused[$target]:-n/a}"
done
