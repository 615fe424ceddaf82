#!/usr/bin/env bash
# The Prometheus alert rules and the Grafana dashboard (docker/prometheus/, docker/grafana/):
#   1. `promtool check rules` and `promtool test rules` (each alert fires on the series that
#      should raise it and not on healthy ones: docker/prometheus/pgtether-alerts.test.yaml);
#      `promtool check config` of docker/prometheus.yml with the rules beside it;
#   2. a real pgtether's /metrics (PGTETHER_BIN, in front of the suite's PostgreSQL, one client
#      and a session advisory lock so that every pool family has samples) passes
#      `promtool check metrics`, and every metric the rules and the dashboard query is in it,
#      so a renamed metric cannot leave an alert or a panel silently empty;
#   3. the dashboard is valid JSON whose every panel has a query, over the data source variable.
# Usage: alerts_test.sh SOURCE_DIR WORK_DIR     (PGT_ENV_FILE, PGTETHER_BIN)
set -euo pipefail
src="$1"
work="$2"
# shellcheck source=scripts/lib/common.sh
source "$src/scripts/lib/common.sh"
# shellcheck source=/dev/null
source "${PGT_ENV_FILE:?PGT_ENV_FILE names the suite PostgreSQL pg.env}"
: "${PGTETHER_BIN:?PGTETHER_BIN names the pgtether binary}"
command -v promtool >/dev/null || pgt_die "promtool is missing (Debian prometheus; scripts/lib/deps.sh)"

rules="$src/docker/prometheus/pgtether-alerts.yaml"
dashboard="$src/docker/grafana/pgtether.json"
fail=0
check() {
    local what="$1"
    shift
    if "$@"; then
        printf 'ok    %s\n' "$what"
    else
        printf 'FAIL  %s\n' "$what"
        fail=1
    fi
}
mkdir -p "$work"
run="$(mktemp -d "$work/run.XXXXXX")"
pid=""
# shellcheck disable=SC2317  # invoked by the trap
cleanup() {
    [[ -z $pid ]] || ! pgt_pid_alive "$pid" || pgt_stop_pid "$pid" 5
    rm -rf "$run"
}
trap cleanup EXIT

# ---- 1. promtool ----
check "promtool check rules" promtool check rules "$rules"
check "promtool test rules" bash -c "cd '$src/docker/prometheus' && promtool test rules pgtether-alerts.test.yaml"
cp "$src/docker/prometheus.yml" "$rules" "$run/"
check "promtool check config: docker/prometheus.yml loads the rules" promtool check config "$run/prometheus.yml"

# ---- 2. the names against a real exposition ----
port="$(pgt_free_port)"
metrics="$(pgt_free_port)"
cat >"$run/pgtether.ini" <<INI
[databases]
app = host=$PGT_PG_HOST port=$PGT_PG_PORT dbname=$PGT_PG_DATABASE
[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $port
unix_socket_dir =
auth_type = trust
auth_file = $run/userlist.txt
pool_mode = transaction
metrics_listen_addr = 127.0.0.1
metrics_listen_port = $metrics
INI
printf '"%s" ""\n' "$PGT_PG_SUPERUSER" >"$run/userlist.txt"
pgt_chown_daemon_user "$run"
pgt_spawn_daemon "$run/pgtether.log" "$PGTETHER_BIN" "$run/pgtether.ini"
pid="$PGT_SPAWNED_PID"
pgt_wait_for_port 127.0.0.1 "$port" 15 "$pid" || { cat "$run/pgtether.log"; pgt_die "pgtether did not start"; }
"$PGT_PG_BIN/psql" -X -q -h 127.0.0.1 -p "$port" -U "$PGT_PG_SUPERUSER" app \
    -c 'SELECT pg_advisory_lock(29)' -c 'SELECT pg_advisory_unlock(29)' >/dev/null
scrape="$run/metrics.txt"
for _ in 1 2 3 4 5; do
    exec 3<>"/dev/tcp/127.0.0.1/$metrics"
    printf 'GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n' >&3
    sed '1,/^\r$/d' <&3 >"$scrape"
    exec 3<&-
    [[ -s $scrape ]] && break
    sleep 0.5
done
check "the live exposition has pgtether's families" grep -q '^pgtether_pool_clients{' "$scrape"
lint="$(promtool check metrics <"$scrape" 2>&1)" || true
[[ -z $lint ]] || printf 'promtool: %s\n' "$lint"
check "promtool check metrics: the live exposition lints clean" test -z "$lint"

# Sample names, and the families declared (a gauge family may have no sample yet, such as the
# tethered clients by reason while nobody is tethered).
samples="$(sed -n -e 's/^\(pgtether_[a-z_]*\)[{ ].*/\1/p' -e 's/^# TYPE \(pgtether_[a-z_]*\) .*/\1/p' "$scrape" | sort -u)"
used() { grep -o 'pgtether_[a-z_]*' "$@" | sort -u; }
missing=""
for name in $(used "$rules") $(used "$dashboard"); do
    grep -qx "$name" <<<"$samples" || missing+=" $name"
done
check "every metric the rules and the dashboard query is exported${missing:+ (missing:$missing)}" test -z "$missing"
check "the rules query the limits added for ratios" \
    bash -c "grep -q pgtether_process_max_fds '$rules' && grep -q pgtether_max_client_conn '$rules'"

# ---- 3. the dashboard ----
check "the dashboard is JSON whose panels all query Prometheus through \$datasource" python3 - "$dashboard" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
panels = [p for p in d["panels"] if p["type"] != "row"]
assert len(panels) >= 10, len(panels)
for p in panels:
    assert p["datasource"]["uid"] == "${datasource}", p["title"]
    assert p["targets"] and all(t["expr"].strip() for t in p["targets"]), p["title"]
titles = " ".join(p["title"].lower() for p in d["panels"])
for topic in ("pools", "wait", "tether", "locks", "probes", "errors", "file descriptors"):
    assert topic in titles, topic
PY

((fail == 0)) && echo "alerts: all checks passed"
exit "$fail"
