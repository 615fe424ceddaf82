#!/usr/bin/env bash
# A throwaway PostgreSQL 15 for tests, benchmarks and the demo.
#
#   scripts/lib/pg.sh start STATE_DIR [--db NAME] [--pgbench-scale N] [--max-connections N]
#                                     [--ssl CERT_DIR]
#   scripts/lib/pg.sh stop  STATE_DIR
#   scripts/lib/pg.sh standby PRIMARY_STATE_DIR STATE_DIR
#
# `standby` makes a streaming standby of the server started in PRIMARY_STATE_DIR (pg_basebackup -R
# over the primary's replication connection), on a free port of its own, and writes
# STATE_DIR/pg.env like `start` (`stop` stops and deletes it the same way). Promote it with
# `pg_ctl promote -D $PGT_PG_DATA` as the postgres user.
#
# --ssl turns on TLS (ssl = on) with CERT_DIR/server.crt and server.key as the server's certificate
# and key and CERT_DIR/ca.crt as the CA for client certificates (ssl_ca_file); the files are copied
# into the data directory. Without it the server has ssl = off, as always.
# `start` runs initdb as the `postgres` user in a fresh mktemp directory, picks a free TCP port,
# listens on 127.0.0.1 plus a Unix socket in that directory, creates the auth-test roles below and
# the database NAME (default pgtether_test) with the pgbench tables (scale 1 by default; 0 = none),
# and writes STATE_DIR/pg.env (KEY=VALUE lines, shell-sourceable, read by the C++ TestEnv too).
# `stop` stops the server named in STATE_DIR/pg.env and deletes its directory and the env file.
# A failed `start` cleans up after itself. Nothing here is durable: fsync is off.
set -euo pipefail

# shellcheck source=scripts/lib/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

PGT_PG_BIN="${PGT_PG_BIN:-/usr/lib/postgresql/15/bin}"

# Roles for authentication tests, one "NAME METHOD PASSWORD" per entry; METHOD is the pg_hba.conf
# method required for that role (md5 roles get an MD5-hashed password, all others a SCRAM verifier).
# Every other role (the superuser `postgres` included) is trusted. Add a line to add a role.
PGT_PG_AUTH_USERS=(
    "scram_user scram-sha-256 secret"
    "md5_user md5 secret"
    "plain_user password secret"
)

# Marker file that proves a directory was made by us before `stop` runs rm -rf on it.
PGT_PG_MARKER=.pgtether-throwaway-postgresql

pg_usage() {
    sed -n '3,6p' "${BASH_SOURCE[0]}" | sed 's/^# *//' >&2
    exit 2
}

pg_psql() {
    local socket_dir="$1" port="$2" db="$3"
    shift 3
    "$PGT_PG_BIN/psql" -X -q -v ON_ERROR_STOP=1 -h "$socket_dir" -p "$port" -U postgres -d "$db" "$@"
}

# Stop the server in data dir $1 (if running) and delete its root $2 (if it carries our marker).
pg_destroy() {
    local data="$1" root="$2"
    if [[ -f $data/postmaster.pid ]]; then
        if ! pgt_as_daemon_user "$PGT_PG_BIN/pg_ctl" -D "$data" -m fast -w -t 30 stop >/dev/null 2>&1; then
            pgt_warn "fast shutdown failed, trying immediate"
            if ! pgt_as_daemon_user "$PGT_PG_BIN/pg_ctl" -D "$data" -m immediate -w -t 30 stop \
                >/dev/null 2>&1; then
                local pid
                pid=$(head -n 1 "$data/postmaster.pid" 2>/dev/null || true)
                if [[ $pid =~ ^[0-9]+$ ]] && pgt_pid_is "$pid" postgres; then
                    kill -KILL "$pid" 2>/dev/null || true
                fi
            fi
        fi
    fi
    if [[ -n $root && -f $root/$PGT_PG_MARKER ]]; then
        rm -rf -- "$root"
    elif [[ -n $root && -d $root ]]; then
        pgt_warn "not deleting $root: no $PGT_PG_MARKER in it"
    fi
}

pg_write_env() {
    local file="$1"
    shift
    local kv
    : >"$file.tmp"
    for kv in "$@"; do
        # Values must survive both `source` and the C++ reader's plain KEY=VALUE split.
        [[ $kv =~ ^[A-Z_]+=[A-Za-z0-9_./:,@+=-]*$ ]] || pgt_die "unsafe env value: $kv"
        printf '%s\n' "$kv" >>"$file.tmp"
    done
    mv "$file.tmp" "$file"
}

# pg_start_on_free_port DATA LOG CONF_FN: picks a free port, has CONF_FN PORT write it into the
# server's configuration, starts the server as the daemon user, and prints the port. Another
# process may take the port between the check and the bind: up to five attempts.
pg_start_on_free_port() {
    local data="$1" log="$2" conf_fn="$3" port attempt
    for attempt in 1 2 3 4 5; do
        port="$(pgt_free_port)"
        "$conf_fn" "$port"
        if pgt_as_daemon_user "$PGT_PG_BIN/pg_ctl" -D "$data" -l "$log" -w -t 60 start \
            >/dev/null 2>&1; then
            printf '%s\n' "$port"
            return 0
        fi
        if grep -q 'could not bind\|Address already in use' "$log" 2>/dev/null && ((attempt < 5)); then
            pgt_warn "port $port was taken, retrying"
            continue
        fi
        cat "$log" >&2 || true
        pgt_die "PostgreSQL did not start"
    done
}

# pg_write_server_env ENV_FILE PORT ROOT DATA LOG DB SCALE SSL AUTH_USERS: the env file `start`
# and `standby` leave for `stop`, the tests (TestEnv) and the benchmarks.
pg_write_server_env() {
    local env_file="$1" port="$2" root="$3" data="$4" log="$5" db="$6" scale="$7" ssl="$8"
    local users="$9"
    pg_write_env "$env_file" \
        "PGT_PG_HOST=127.0.0.1" \
        "PGT_PG_PORT=$port" \
        "PGT_PG_SOCKET_DIR=$root" \
        "PGT_PG_DATA=$data" \
        "PGT_PG_BIN=$PGT_PG_BIN" \
        "PGT_PG_ROOT=$root" \
        "PGT_PG_LOG=$log" \
        "PGT_PG_TMP=$root/tmp" \
        "PGT_PG_SUPERUSER=postgres" \
        "PGT_PG_DATABASE=$db" \
        "PGT_PG_PGBENCH_SCALE=$scale" \
        "PGT_PG_SSL=$ssl" \
        "PGT_PG_AUTH_USERS=$users"
}

pg_start() {
    local state_dir="" db=pgtether_test scale=1 max_connections=300 ssl_dir=""
    while (($#)); do
        case "$1" in
        --ssl)
            ssl_dir="$2"
            shift 2
            ;;
        --db)
            db="$2"
            shift 2
            ;;
        --pgbench-scale)
            scale="$2"
            shift 2
            ;;
        --max-connections)
            max_connections="$2"
            shift 2
            ;;
        -*) pg_usage ;;
        *)
            [[ -z $state_dir ]] || pg_usage
            state_dir="$1"
            shift
            ;;
        esac
    done
    [[ -n $state_dir ]] || pg_usage
    [[ $db =~ ^[a-z_][a-z0-9_]*$ ]] || pgt_die "database name must be a plain identifier: $db"
    [[ -x $PGT_PG_BIN/initdb ]] || pgt_die "PostgreSQL 15 not found in $PGT_PG_BIN"
    if [[ -n $ssl_dir ]]; then
        local f
        for f in server.crt server.key ca.crt; do
            [[ -r $ssl_dir/$f ]] || pgt_die "--ssl: $ssl_dir/$f is missing"
        done
    fi

    mkdir -p "$state_dir"
    state_dir="$(cd "$state_dir" && pwd)"
    local env_file="$state_dir/pg.env"
    if [[ -f $env_file ]]; then
        pgt_log "stopping the PostgreSQL left over in $state_dir"
        pg_stop "$state_dir"
    fi

    local root data log port
    root="$(mktemp -d -p "${PGT_TMPDIR:-/tmp}" pgtether-pg.XXXXXX)"
    touch "$root/$PGT_PG_MARKER"
    data="$root/data"
    log="$root/postgresql.log"
    # Until the env file is written, a failure (or Ctrl-C) must not leave a server behind.
    # shellcheck disable=SC2064  # expand now: $data and $root are fixed from here on.
    trap "pg_destroy '$data' '$root'" EXIT
    trap 'exit 130' INT TERM
    chmod 755 "$root"  # the socket lives here; clients running as other users must reach it
    # Scratch space for the tests' own temp dirs (pooler configs, logs, sockets): deleted with the
    # server, so even a test killed mid-way leaves nothing behind once the fixture cleans up.
    mkdir -m 1777 "$root/tmp"
    pgt_chown_daemon_user "$root"

    pgt_as_daemon_user "$PGT_PG_BIN/initdb" -D "$data" -U postgres -A trust -E UTF8 --locale=C \
        --no-sync >"$root/initdb.log" 2>&1 || {
        cat "$root/initdb.log" >&2
        pgt_die "initdb failed"
    }

    # Roles with a password method come first: pg_hba.conf takes the first matching line.
    {
        printf '# Generated by scripts/lib/pg.sh\n'
        printf '# TYPE  DATABASE  USER  ADDRESS  METHOD\n'
        local entry name method _password
        for entry in "${PGT_PG_AUTH_USERS[@]}"; do
            read -r name method _password <<<"$entry"
            printf 'local all %s %s\n' "$name" "$method"
            printf 'host  all %s 127.0.0.1/32 %s\n' "$name" "$method"
        done
        printf 'local all all trust\n'
        printf 'host  all all 127.0.0.1/32 trust\n'
        # Streaming standbys of this server (pg.sh standby) connect as postgres; replication
        # clients through pgtether (test_replication) as any role, which PostgreSQL itself
        # then checks for the REPLICATION attribute.
        printf 'local replication all trust\n'
        printf 'host  replication all 127.0.0.1/32 trust\n'
    } >"$data/pg_hba.conf"

    local ssl_setting="ssl = off"
    if [[ -n $ssl_dir ]]; then
        # PostgreSQL insists that its key belongs to it and nobody else may read it.
        cp "$ssl_dir/server.crt" "$ssl_dir/server.key" "$ssl_dir/ca.crt" "$data/"
        chmod 600 "$data/server.key"
        pgt_chown_daemon_user "$data/server.crt" "$data/server.key" "$data/ca.crt"
        ssl_setting="ssl = on
ssl_cert_file = 'server.crt'
ssl_key_file = 'server.key'
ssl_ca_file = 'ca.crt'"
    fi

    pg_conf_primary() {
        cat >"$data/postgresql.auto.conf" <<CONF
# Generated by scripts/lib/pg.sh (throwaway server: durability is deliberately off)
listen_addresses = '127.0.0.1'
port = $1
unix_socket_directories = '$root'
max_connections = $max_connections
password_encryption = 'scram-sha-256'
$ssl_setting
fsync = off
synchronous_commit = off
full_page_writes = off
CONF
    }
    port="$(pg_start_on_free_port "$data" "$log" pg_conf_primary)"

    local entry name method password sql
    for entry in "${PGT_PG_AUTH_USERS[@]}"; do
        read -r name method password <<<"$entry"
        local encryption=scram-sha-256
        [[ $method == md5 ]] && encryption=md5
        pg_psql "$root" "$port" postgres -v name="$name" -v pw="$password" -v enc="$encryption" \
            <<'SQL'
SET password_encryption = :'enc';
CREATE ROLE :"name" LOGIN PASSWORD :'pw';
SQL
    done
    pg_psql "$root" "$port" postgres -c "CREATE DATABASE $db"
    # Since PostgreSQL 15 only the owner may create in schema public; tests create tables as the
    # auth-test roles too.
    sql="GRANT CREATE, USAGE ON SCHEMA public TO PUBLIC"
    pg_psql "$root" "$port" "$db" -c "$sql"
    if ((scale > 0)); then
        "$PGT_PG_BIN/pgbench" -i -q -s "$scale" -h "$root" -p "$port" -U postgres "$db" \
            >"$root/pgbench-init.log" 2>&1 || {
            cat "$root/pgbench-init.log" >&2
            pgt_die "pgbench -i failed"
        }
        pg_psql "$root" "$port" "$db" -c "GRANT ALL ON ALL TABLES IN SCHEMA public TO PUBLIC"
    fi

    local users=() joined
    for entry in "${PGT_PG_AUTH_USERS[@]}"; do
        read -r name method password <<<"$entry"
        users+=("$name:$method:$password")
    done
    joined="$(IFS=,; printf '%s' "${users[*]}")"
    pg_write_server_env "$env_file" "$port" "$root" "$data" "$log" "$db" "$scale" \
        "$([[ -n $ssl_dir ]] && echo on || echo off)" "$joined"
    trap - EXIT INT TERM

    cat <<INFO
PostgreSQL $("$PGT_PG_BIN/postgres" -V | awk '{print $3}') is running (throwaway, data in $data)
  host:       127.0.0.1   port: $port
  socket dir: $root
  database:   $db (pgbench scale $scale); superuser postgres (trust)
  auth roles: ${PGT_PG_AUTH_USERS[*]/%/;}
  connect:    psql -h 127.0.0.1 -p $port -U postgres $db
  env file:   $env_file
  stop:       $0 stop $state_dir
INFO
}

pg_standby() {
    local primary_dir="${1:-}" state_dir="${2:-}"
    [[ -n $primary_dir && -n $state_dir ]] || pg_usage
    local primary_env="$primary_dir/pg.env"
    [[ -f $primary_env ]] || pgt_die "no primary running in $primary_dir"
    local primary_port db scale
    primary_port="$(sed -n 's/^PGT_PG_PORT=//p' "$primary_env")"
    db="$(sed -n 's/^PGT_PG_DATABASE=//p' "$primary_env")"
    scale="$(sed -n 's/^PGT_PG_PGBENCH_SCALE=//p' "$primary_env")"
    mkdir -p "$state_dir"
    state_dir="$(cd "$state_dir" && pwd)"
    local env_file="$state_dir/pg.env"
    [[ -f $env_file ]] && pg_stop "$state_dir"

    local root data log port
    root="$(mktemp -d -p "${PGT_TMPDIR:-/tmp}" pgtether-pg.XXXXXX)"
    touch "$root/$PGT_PG_MARKER"
    data="$root/data"
    log="$root/postgresql.log"
    # shellcheck disable=SC2064  # expand now: $data and $root are fixed from here on.
    trap "pg_destroy '$data' '$root'" EXIT
    trap 'exit 130' INT TERM
    chmod 755 "$root"
    mkdir -m 1777 "$root/tmp"
    pgt_chown_daemon_user "$root"
    pgt_as_daemon_user "$PGT_PG_BIN/pg_basebackup" -D "$data" -R -X stream -c fast \
        -h 127.0.0.1 -p "$primary_port" -U postgres >"$root/basebackup.log" 2>&1 || {
        cat "$root/basebackup.log" >&2
        pgt_die "pg_basebackup failed"
    }
    rm -f "$data/postmaster.pid" "$data/postmaster.opts"
    # pg_basebackup -R appended primary_conninfo to the copied postgresql.auto.conf; the lines
    # written here come later and win (a retry on another port appends again: the last wins).
    pg_conf_standby() {
        cat >>"$data/postgresql.auto.conf" <<CONF
port = $1
unix_socket_directories = '$root'
hot_standby = on
CONF
    }
    port="$(pg_start_on_free_port "$data" "$log" pg_conf_standby)"
    local users
    users="$(sed -n 's/^PGT_PG_AUTH_USERS=//p' "$primary_env")"
    pg_write_server_env "$env_file" "$port" "$root" "$data" "$log" "$db" "$scale" off "$users"
    trap - EXIT INT TERM
    echo "standby of port $primary_port running on port $port (data in $data)"
}

pg_stop() {
    local state_dir="${1:-}"
    [[ -n $state_dir ]] || pg_usage
    local env_file="$state_dir/pg.env"
    if [[ ! -f $env_file ]]; then
        return 0  # nothing running (already stopped, or never started)
    fi
    local data root
    data="$(sed -n 's/^PGT_PG_DATA=//p' "$env_file")"
    root="$(sed -n 's/^PGT_PG_ROOT=//p' "$env_file")"
    pg_destroy "$data" "$root"
    rm -f "$env_file"
}

if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
    cmd="${1:-}"
    shift || true
    case "$cmd" in
    start) pg_start "$@" ;;
    stop) pg_stop "$@" ;;
    standby) pg_standby "$@" ;;
    *) pg_usage ;;
    esac
fi
