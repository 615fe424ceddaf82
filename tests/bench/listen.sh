#!/usr/bin/env bash
# LISTEN/NOTIFY at pool cost (issue 31; docs/benchmarks.md): N listeners on C channels and a
# producer at R notifications a second, the listeners connected to PostgreSQL directly and through
# pgtether (transaction pooling, default_pool_size 10, listen_mode = multiplex), one after the
# other on one throwaway PostgreSQL. Reports the delivery latency (p50, p99, max: from the
# producer's send to the listener's read), the deliveries against those expected, the CPU of
# pgtether and of PostgreSQL over the run, and pgtether's resident memory per idle listener.
# The producer always connects directly, so both targets deliver the same notifications.
# tests/bench/listen_latency.cpp is the client (built here with g++ and libpq). Not a test.
set -euo pipefail

# shellcheck source=scripts/lib/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib/common.sh"
# shellcheck source=tests/bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

usage() {
    cat <<'USAGE'
usage: tests/bench/listen.sh [options]
  --listeners N     listening clients (default 1000)
  --channels C      channels, listeners spread evenly (default 10)
  --rate R          notifications a second (default 5000)
  -T SECONDS        how long the producer runs (default 20)
  --targets "..."   direct and/or pgtether (default "direct pgtether")
  --pgtether BIN    the pgtether binary (default build/proxy/pgtether)
  --keep            keep the state directory
USAGE
    exit 2
}

listeners=1000 channels=10 rate=5000 seconds=20 targets="direct pgtether" keep=0
pgtether_bin="${PGT_BUILD_DIR:-$PGT_ROOT/build}/proxy/pgtether"
while (($#)); do
    case "$1" in
    --listeners) listeners="$2"; shift 2 ;;
    --channels) channels="$2"; shift 2 ;;
    --rate) rate="$2"; shift 2 ;;
    -T) seconds="$2"; shift 2 ;;
    --targets) targets="$2"; shift 2 ;;
    --pgtether) pgtether_bin="$2"; shift 2 ;;
    --keep) keep=1; shift ;;
    *) usage ;;
    esac
done

bench_make_state pgtether-listen
bench_raise_fd_limit $((2 * listeners + 200))
db=pgtether_bench
pgt_log "starting a throwaway PostgreSQL (max_connections $((listeners + 100)))"
"$PGT_ROOT/scripts/lib/pg.sh" start "$state/postgresql" --db "$db" \
    --max-connections $((listeners + 100)) >/dev/null
# shellcheck source=/dev/null
source "$state/postgresql/pg.env"
postmaster_pid="$(head -n 1 "$PGT_PG_DATA/postmaster.pid")"
g++ -O2 -std=c++20 "$PGT_ROOT/tests/bench/listen_latency.cpp" -o "$state/listen_latency" \
    -I"$(pg_config --includedir 2>/dev/null || echo /usr/include/postgresql)" -lpq -pthread ||
    pgt_die "could not build tests/bench/listen_latency.cpp"

pooler_port="$(pgt_free_port)"
bench_write_ini "$state/pgtether.ini" listen.sh trust $((listeners + 100))
sed -i 's/^default_pool_size = 20$/default_pool_size = 10/' "$state/pgtether.ini"
printf 'listen_mode = multiplex\n' >>"$state/pgtether.ini"
printf '"postgres" ""\n' >"$state/userlist.txt"
pgt_chown_daemon_user "$state"
direct="host=127.0.0.1 port=$PGT_PG_PORT user=postgres dbname=$db sslmode=disable"
pooled="host=127.0.0.1 port=$pooler_port user=postgres dbname=$db sslmode=disable"
hz="$(getconf CLK_TCK)"

printf '%-9s %10s %10s %8s %8s %8s %12s %12s %12s\n' target delivered expected p50_ms p99_ms \
    max_ms pooler_cpu_s pg_cpu_s kib_per_listener
for target in $targets; do
    rss_before="" conninfo="$direct"
    if [[ $target == pgtether ]]; then
        bench_pooler_start pgtether "$pgtether_bin" "$state/pgtether.ini" || continue
        rss_before="$(rss_kib "$pooler_pid")"
        conninfo="$pooled"
    fi
    out="$state/$target.out"
    "$state/listen_latency" --listen "$conninfo" --produce "$direct" --listeners "$listeners" \
        --channels "$channels" --rate "$rate" --seconds "$seconds" --settle 3 >"$out" &
    client=$!
    until grep -q READY "$out" 2>/dev/null; do
        kill -0 "$client" 2>/dev/null || pgt_die "the listeners did not connect ($target)"
        sleep 0.2
    done
    per_listener=n/a pooler_ticks0=0
    if [[ -n $rss_before ]]; then
        sleep 1
        per_listener="$(awk -v a="$rss_before" -v b="$(rss_kib "$pooler_pid")" -v n="$listeners" \
            'BEGIN { printf "%.1f", (b - a) / n }')"
        pooler_ticks0="$(pooler_cpu_ticks)"
    fi
    pg_ticks0="$(cluster_ticks)"
    wait "$client"
    pg_ticks=$(($(cluster_ticks) - pg_ticks0))
    pooler_cpu=n/a
    if [[ $target == pgtether ]]; then
        pooler_cpu="$(awk -v t=$(($(pooler_cpu_ticks) - pooler_ticks0)) -v hz="$hz" 'BEGIN { printf "%.2f", t / hz }')"
        pooler_stop
    fi
    read -r _ delivered _ expected _ p50 _ p99 _ max < <(grep delivered "$out")
    printf '%-9s %10s %10s %8s %8s %8s %12s %12s %12s\n' "$target" "$delivered" "$expected" "$p50" \
        "$p99" "$max" "$pooler_cpu" "$(awk -v t="$pg_ticks" -v hz="$hz" 'BEGIN { printf "%.2f", t / hz }')" \
        "$per_listener"
done
