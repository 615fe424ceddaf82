#!/usr/bin/env bash
# docker/ and docker/k8s/ (issue 29): what can be checked without a container runtime.
#   1. Every manifest of docker/k8s/ against the Kubernetes API schemas (k8s_validate.mjs, npm
#      packages kubernetes-models 5.1.0 for the schemas and typescript 5.9.3 for unknown fields,
#      installed into WORK_DIR/npm once), and kustomization.yaml's resources.
#   2. The promises between the files: the Dockerfile's numeric USER is the pod's runAsUser and
#      runAsGroup, runAsNonRoot is set, nothing is mounted with subPath, the liveness probe asks
#      /healthz and the readiness probe /readyz on the port the ConfigMap's ini serves metrics on,
#      pgtether's args name the ini where the ConfigMap volume puts it, the reloader sidecar
#      mounts the same volumes; haproxy.cfg (compose) passes `haproxy -c`.
#   3. The scripts the image ships, run for real against a pgtether (PGTETHER_BIN) in front of the
#      suite's PostgreSQL (PGT_ENV_FILE): the HEALTHCHECK (docker/healthcheck.sh) answers 0 while
#      /healthz answers and 1 when nothing listens; the config-reloader sidecar
#      (docker/config-reloader.sh), watching directories laid out as the kubelet lays out a
#      ConfigMap and a Secret volume (..data symlink swapped to a new version), sends RELOAD after
#      a change of either, so a new password and a new database work without a restart.
# Usage: manifests_test.sh SOURCE_DIR WORK_DIR
set -euo pipefail
src="$1"
work="$2"
# shellcheck source=scripts/lib/common.sh
source "$src/scripts/lib/common.sh"
# shellcheck source=/dev/null
source "${PGT_ENV_FILE:?PGT_ENV_FILE names the suite PostgreSQL pg.env}"
: "${PGTETHER_BIN:?PGTETHER_BIN names the pgtether binary}"

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
k8s="$src/docker/k8s"
dockerfile="$src/docker/Dockerfile"

# ---- 1. schemas ----
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
    pgt_die "node and npm are needed (the machine's Node.js)"
fi
npm_dir="$work/npm"
mkdir -p "$npm_dir"
if [[ ! -f $npm_dir/.installed-v1 ]]; then
    [[ -f $npm_dir/package.json ]] || echo '{"private": true}' >"$npm_dir/package.json"
    (cd "$npm_dir" && npm install --no-audit --no-fund --silent \
        kubernetes-models@5.1.0 yaml@2.9.1 typescript@5.9.3) || pgt_die "npm install failed"
    touch "$npm_dir/.installed-v1"
fi
mapfile -t manifests < <(find "$k8s" -maxdepth 1 -name '*.yaml' ! -name kustomization.yaml | sort)
check "every manifest of docker/k8s validates against the Kubernetes schemas (${#manifests[@]} files)" \
    node "$src/tests/scripts/k8s_validate.mjs" "$npm_dir" "${manifests[@]}"
listed="$(sed -n 's/^  - //p' "$k8s/kustomization.yaml" | sort)"
present="$(for f in "${manifests[@]}"; do basename "$f"; done | sort)"
check "kustomization.yaml lists exactly the manifests" test "$listed" = "$present"
# The validator itself must fail on what the API server refuses.
sed 's/readinessProbe:/readinesProbe:/' "$k8s/deployment.yaml" >"$work/bad-field.yaml"
sed 's/containerPort: 6432/containerPort: "6432x"/' "$k8s/deployment.yaml" >"$work/bad-type.yaml"
check "the validator refuses an unknown field" \
    bash -c "! node '$src/tests/scripts/k8s_validate.mjs' '$npm_dir' '$work/bad-field.yaml' >/dev/null"
check "the validator refuses a wrong type" \
    bash -c "! node '$src/tests/scripts/k8s_validate.mjs' '$npm_dir' '$work/bad-type.yaml' >/dev/null"

# ---- 2. the files agree ----
deployment="$k8s/deployment.yaml"
user_line="$(sed -n 's/^USER //p' "$dockerfile")"
check "the Dockerfile's USER is numeric uid:gid ($user_line)" grep -Eqx '[0-9]+:[0-9]+' <<<"$user_line"
check "runAsUser is the image's uid" grep -q "runAsUser: ${user_line%%:*}\$" "$deployment"
check "runAsGroup is the image's gid" grep -q "runAsGroup: ${user_line##*:}\$" "$deployment"
check "runAsNonRoot is set" grep -q 'runAsNonRoot: true' "$deployment"
check "nothing is mounted with subPath" bash -c "! grep -q '^ *subPath:' '$deployment'"
probe_path() { sed -n "/$1:/,/port:/s/^ *path: //p" "$deployment" | head -n 1; }
check "the liveness probe asks /healthz" test "$(probe_path livenessProbe)" = /healthz
check "the readiness probe asks /readyz" test "$(probe_path readinessProbe)" = /readyz
metrics_port="$(sed -n 's/^ *metrics_listen_port = //p' "$k8s/configmap.yaml")"
metrics_container_port="$(grep -A1 -- '- name: metrics$' "$deployment" | sed -n 's/^ *containerPort: //p')"
check "the metrics containerPort is the ini's metrics_listen_port ($metrics_port)" \
    test "$metrics_container_port" = "$metrics_port"
config_mount="$(grep -A1 -- '- name: config$' "$deployment" | sed -n 's/^ *mountPath: //p' | head -n 1)"
check "pgtether's args name the ini in the ConfigMap volume ($config_mount)" \
    grep -q "args: \[\"$config_mount/pgtether.ini\"\]" "$deployment"
check "both containers mount the config, the userlist and the socket directory" \
    test "$(grep -c -- '- name: config$\|- name: userlist$\|- name: run$' "$deployment")" -eq 9
check "the image has the HEALTHCHECK and reloader scripts the manifests use" \
    bash -c "grep -q 'COPY docker/healthcheck.sh /usr/local/bin/pgtether-healthcheck' '$dockerfile' &&
             grep -q 'CMD \[\"/usr/local/bin/pgtether-healthcheck\"\]' '$dockerfile' &&
             grep -q 'COPY docker/config-reloader.sh /usr/local/bin/pgtether-config-reloader' '$dockerfile' &&
             grep -q 'command: \[\"/usr/local/bin/pgtether-config-reloader\"\]' '$deployment'"
check "docker/compose.yaml parses; haproxy waits for both instances' HEALTHCHECK" node -e '
const { parse } = require(process.argv[1]);
const compose = parse(require("fs").readFileSync(process.argv[2], "utf8"), { merge: true });
const wait = compose.services.haproxy.depends_on;
for (const name of ["pgtether1", "pgtether2"]) {
  if (compose.services[name].image !== "pgtether:latest") process.exit(1);
  if (wait[name]?.condition !== "service_healthy") process.exit(1);
}' "$npm_dir/node_modules/yaml" "$src/docker/compose.yaml"
if command -v haproxy >/dev/null; then
    sed 's/pgtether[12]:6432/127.0.0.1:6432/' "$src/docker/haproxy.cfg" >"$work/haproxy.cfg"
    check "docker/haproxy.cfg passes haproxy -c (its /readyz check included)" \
        haproxy -c -q -f "$work/haproxy.cfg"
fi

# ---- 3. the image's scripts against a real pgtether ----
run="$(mktemp -d "$work/run.XXXXXX")"
pids=()
# shellcheck disable=SC2317  # invoked by the trap
cleanup() {
    local pid
    for pid in "${pids[@]}"; do pgt_pid_alive "$pid" && pgt_stop_pid "$pid" 5; done
    rm -rf "$run"
}
trap cleanup EXIT

# A volume as the kubelet writes it: files in a versioned directory, ..data -> it, and each
# visible name a symlink through ..data; an update writes a new version and swaps ..data.
volume_version() {
    local dir="$1" version="$2" name="$3" content="$4"
    mkdir -p "$dir/..$version"
    printf '%s' "$content" >"$dir/..$version/$name"
    ln -sfn "..$version" "$dir/..data.tmp"
    mv -T "$dir/..data.tmp" "$dir/..data"
    [[ -L $dir/$name ]] || ln -s "..data/$name" "$dir/$name"
}
port="$(pgt_free_port)"
metrics="$(pgt_free_port)"
ini() {
    cat <<INI
[databases]
app = host=$PGT_PG_HOST port=$PGT_PG_PORT dbname=$PGT_PG_DATABASE
$1
[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $port
unix_socket_dir = $run/socket
auth_type = md5
auth_file = $run/secret/userlist.txt
pool_mode = transaction
metrics_listen_addr = 127.0.0.1
metrics_listen_port = $metrics
INI
}
mkdir -p "$run/config" "$run/secret" "$run/socket"
volume_version "$run/config" v1 pgtether.ini "$(ini "")"
volume_version "$run/secret" v1 userlist.txt '"postgres" "first-secret"'$'\n'
pgt_chown_daemon_user "$run"

pgt_spawn_daemon "$run/pgtether.log" "$PGTETHER_BIN" "$run/config/pgtether.ini"
pids+=("$PGT_SPAWNED_PID")
pgt_wait_for_port 127.0.0.1 "$port" 15 "$PGT_SPAWNED_PID" || {
    cat "$run/pgtether.log"
    pgt_die "pgtether did not start"
}
pgt_wait_for_port 127.0.0.1 "$metrics" 10 || pgt_die "the metrics port did not open"
check "HEALTHCHECK: healthy while /healthz answers" \
    env PGTETHER_METRICS_PORT="$metrics" "$src/docker/healthcheck.sh"
check "HEALTHCHECK: unhealthy where nothing answers" \
    bash -c "! PGTETHER_METRICS_PORT=$(pgt_free_port) '$src/docker/healthcheck.sh'"

login() { # USER PASSWORD DB -> prints the result or the error
    PGPASSWORD="$2" "$PGT_PG_BIN/psql" -X -q -A -t -h 127.0.0.1 -p "$port" -U "$1" "$3" \
        -c "SELECT current_database()" 2>&1 || true
}
check "before: the first password works" test "$(login postgres first-secret app)" = "$PGT_PG_DATABASE"

# The sidecar, as the pod runs it (same user as pgtether; 1 s instead of 10 s).
pgt_spawn_daemon "$run/reloader.log" env PGTETHER_RELOAD_WATCH="$run/config $run/secret" \
    PGTETHER_RELOAD_INTERVAL=1 PGTETHER_SOCKET_DIR="$run/socket" PGTETHER_PORT="$port" \
    PGTETHER_PSQL="$PGT_PG_BIN/psql" "$src/docker/config-reloader.sh"
pids+=("$PGT_SPAWNED_PID")
sleep 1.5
# A new Secret version (a new password) and a new ConfigMap version (a second database name).
volume_version "$run/secret" v2 userlist.txt '"postgres" "second-secret"'$'\n'
volume_version "$run/config" v2 pgtether.ini "$(ini "app2 = host=$PGT_PG_HOST port=$PGT_PG_PORT dbname=$PGT_PG_DATABASE")"
pgt_chown_daemon_user "$run"
deadline=$((SECONDS + 15))
until [[ $(login postgres second-secret app2) == "$PGT_PG_DATABASE" ]] || ((SECONDS > deadline)); do
    sleep 0.5
done
check "after the volumes changed: the new password and the new database work" \
    test "$(login postgres second-secret app2)" = "$PGT_PG_DATABASE"
check "after the volumes changed: the old password is refused" \
    grep -q 'password authentication failed' <<<"$(login postgres first-secret app)"
check "the reloader logged its RELOAD" grep -q 'RELOAD sent' "$run/reloader.log"
[[ $fail == 0 ]] || { echo "--- reloader log"; cat "$run/reloader.log"; echo "--- pgtether log"; tail -n 30 "$run/pgtether.log"; }

((fail == 0)) && echo "manifests: all checks passed"
exit "$fail"
