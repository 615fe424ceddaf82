#!/bin/bash
# pgtether-config-reloader: the Kubernetes sidecar that makes pgtether reload when its mounted
# ConfigMap or Secret changes (docker/k8s/deployment.yaml; docs/deployment.md#kubernetes).
#
# The kubelet updates a ConfigMap or Secret volume mounted without subPath by writing the new
# files into a fresh directory and swapping the volume's ..data symlink to it. pgtether does not
# watch its files: every PGTETHER_RELOAD_INTERVAL seconds (default 10) this loop hashes the files
# of the watched directories, and when the hash differs from the one pgtether last loaded, it sends
# RELOAD on the admin console over pgtether's Unix socket (the emptyDir both containers mount).
# It runs as the same uid as pgtether, so the console lets it in as the user pgbouncer without a
# password. A RELOAD that fails (pgtether not up yet, or a broken config, which pgtether refuses
# and keeps the running one) is retried at the next turn.
#
# Environment:
#   PGTETHER_RELOAD_WATCH     directories to watch, space-separated
#                             (default: /etc/pgtether/config /etc/pgtether/secret)
#   PGTETHER_RELOAD_INTERVAL  seconds between checks (default 10)
#   PGTETHER_SOCKET_DIR       pgtether's unix_socket_dir (default /var/run/pgtether)
#   PGTETHER_PORT             its listen_port (default 6432)
#   PGTETHER_PSQL             psql to use (default: psql)
set -u

watch_dirs="${PGTETHER_RELOAD_WATCH:-/etc/pgtether/config /etc/pgtether/secret}"
interval="${PGTETHER_RELOAD_INTERVAL:-10}"
socket_dir="${PGTETHER_SOCKET_DIR:-/var/run/pgtether}"
port="${PGTETHER_PORT:-6432}"
psql="${PGTETHER_PSQL:-psql}"

log() { printf '%s pgtether-config-reloader: %s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$*"; }

# The names and contents of the visible files (the kubelet's ..data and ..TIMESTAMP entries start
# with a dot; the visible names are links through ..data, so this reads the current version).
config_hash() {
    local dir
    for dir in $watch_dirs; do
        find -L "$dir" -mindepth 1 -maxdepth 1 -type f ! -name '.*' -print0 2>/dev/null |
            sort -z | xargs -0 -r sha256sum
    done | sha256sum | cut -d' ' -f1
}

reload() {
    "$psql" -X -q -h "$socket_dir" -p "$port" -U pgbouncer -d pgbouncer -c RELOAD >/dev/null 2>&1
}

trap 'exit 0' TERM INT
# pgtether read these files when it started: that is the version it runs.
loaded="$(config_hash)"
log "watching $watch_dirs every ${interval}s (hash ${loaded:0:12})"
while :; do
    sleep "$interval" &
    wait $!
    current="$(config_hash)"
    [[ $current == "$loaded" ]] && continue
    if reload; then
        log "files changed (hash ${current:0:12}): RELOAD sent"
        loaded="$current"
    else
        log "files changed (hash ${current:0:12}) but RELOAD failed; retrying in ${interval}s"
    fi
done
