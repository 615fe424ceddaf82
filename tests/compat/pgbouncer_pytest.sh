#!/usr/bin/env bash
# PgBouncer 1.24.1's own pytest suite (test/test_*.py), run against pgtether or, for reference,
# against PgBouncer 1.24.1 itself.
#
#   tests/compat/pgbouncer_pytest.sh [--binary PATH|--reference] [--work DIR] [--timeout SECONDS]
#                                    [PYTEST_ARGS...]
#
#   --binary     the program put in the place of `pgbouncer` (default: build/proxy/pgtether)
#   --reference  PgBouncer 1.24.1 itself, built from the same source tree
#   --work       where the sources, the build and the results go (default: build/compat124)
#   --timeout    bound on the whole pytest run (default 1800 s); each test has the suite's own 30 s
#   PYTEST_ARGS  passed to pytest, run in the tree's test/ directory (default: .), e.g.
#                test_admin.py, test_auth.py::test_auth_user, -k show, -n 2 (pytest-xdist)
#
# The sources are Debian 13's pgbouncer 1.24.1 source package (`apt-get source
# pgbouncer=1.24.1-1+deb13u2` with a deb-src entry for trixie in a private apt configuration under
# the work directory; the system's apt sources and lists are not touched), fetched and built once
# (`./configure --with-cares --with-systemd`): the harness reads ../config.mak and
# ../include/bouncer.h, and the build is the reference binary. The harness runs unmodified: the
# binary is copied to the tree's top directory, where the harness runs `../pgbouncer`.
#
# The harness listens on fixed port 6667 and puts Unix sockets in /tmp. As root the run gets
# private namespaces (network with its own loopback, so ::1 exists and nothing collides; mounts,
# with a private tmpfs on /tmp holding the tree and an /etc/hosts naming ::1 localhost too; PIDs,
# so everything it started dies with it) and pytest runs as the `postgres` user (initdb refuses
# root; the console login as `pgbouncer` relies on peer authentication) with HAVE_IPV6_LOCALHOST=1.
# USE_SUDO is not set: the tests that need `tc netem` or iptables skip themselves.
#
# Output: one line per test (PASS, FAIL, SKIP, or XFAIL for the known exceptions listed in
# known_exception below, each with its reason; XPASS if one of them passes), then
# "N passed, N failed, N skipped, N known exceptions". Exit status 0 when nothing failed other than
# a known exception. pytest's own output and the junit report stay in WORK/results/BINARY/.
# Failures are reported with --tb=native: pytest 7.2's own traceback style parses the test's
# source again, which Debian 12's Python 3.11 can abort with "SystemError: AST constructor
# recursion depth mismatch" after a test timed out, ending the whole run.
set -euo pipefail

# shellcheck source=scripts/lib/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib/common.sh"

pgbouncer_version=1.24.1
debian_version=1.24.1-1+deb13u2
binary="${PGT_BUILD_DIR:-$PGT_ROOT/build}/proxy/pgtether"
work="${PGT_BUILD_DIR:-$PGT_ROOT/build}/compat124"
timeout_seconds=1800
reference=0
pytest_args=()

usage() {
    sed -n '5,13p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
    exit 2
}

while (($#)); do
    case "$1" in
    --binary) binary="$2"; shift 2 ;;
    --reference) reference=1; shift ;;
    --work) work="$2"; shift 2 ;;
    --timeout) timeout_seconds="$2"; shift 2 ;;
    -h | --help) usage ;;
    *) pytest_args+=("$1"); shift ;;
    esac
done

PG_BIN="${PGT_PG_BIN:-/usr/lib/postgresql/15/bin}"
[[ -x $PG_BIN/initdb ]] || pgt_die "PostgreSQL binaries not found in $PG_BIN (set PGT_PG_BIN)"
mkdir -p "$work"
work="$(readlink -f "$work")"

# Tests that need what pgtether deliberately does differently, with the reason a user would
# accept (docs/testing.md lists them). They run, and are reported as XFAIL when they fail
# (XPASS, counted as passed, if they pass). What pgtether does not do yet would not be here:
# those tests fail.
known_exception() {
    case "$1" in
    test_operations.py::test_online_restart | test_operations.py::test_scram_takeover)
        echo "online restart (-R) is not supported: so_reuseport and SHUTDOWN WAIT_FOR_CLIENTS replace it"
        ;;
    test_operations.py::test_suspend_resume)
        echo "SUSPEND exists for the online restart only and is refused"
        ;;
    test_auth.py::test_auth_user | test_no_user.py::test_no_user_auth_user | \
        test_auth.py::test_auth_user_with_same_forced_user | \
        test_auth.py::test_auth_user_at_db_level_with_same_forced_user)
        echo "a user auth_query does not find gets a wrong password's answer, not 'no such user' (which tells who exists)"
        ;;
    test_no_database.py::test_no_database_auto_database_auth_user)
        echo "an unauthenticated client is not told whether a database exists ('bouncer config error')"
        ;;
    test_misc.py::test_options_startup_param)
        echo "any setting in options is applied (session_settings = replay), not refused"
        ;;
    test_misc.py::test_equivalent_startup_param)
        echo "checks PgBouncer's internal debug lines (varcache_apply, varcache_set_canonical)"
        ;;
    test_prepared.py::test_deallocate_all | test_prepared.py::test_discard_all | \
        test_prepared.py::test_describe_non_existent_prepared_statement)
        echo "an unknown statement gets PostgreSQL's 26000 'prepared statement \"x\" does not exist', and the connection stays"
        ;;
    test_prepared.py::test_prepared_failed_prepare_pipeline)
        echo "the same error as on a direct connection: psycopg binds a statement whose Parse the aborted pipeline skipped"
        ;;
    test_prepared.py::test_prepared_statement_counters)
        echo "a client's Parse is prepared again in its own session where the backend has the text from another client"
        ;;
    test_prepared.py::test_evict_statement_cache)
        echo "pg_prepared_statements also shows the tether's own prepared probe"
        ;;
    test_auth.py::test_auth_dbname_usage_global_setting)
        echo "a file with an invalid value is refused as a whole at RELOAD (PgBouncer applies the lines above it)"
        ;;
    test_auth.py::test_hba_leak)
        echo "an HBA file with cert lines is refused without client TLS and client_tls_ca_file (PgBouncer loads it)"
        ;;
    test_auth.py::test_auth_dbname_usage)
        echo "a console user missing from auth_file is looked up with the global auth_dbname only (PgBouncer also takes the '*' entry's)"
        ;;
    test_auth.py::test_change_server_password_reconnect)
        echo "server connections for waiting clients are opened in parallel (PgBouncer: one at a time), so a changed password fails two logins at PostgreSQL, not one"
        ;;
    test_ssl.py::test_server_ssl_verify)
        echo "a server certificate that fails verification is reported to the client at once, not after connect_timeout"
        ;;
    test_timeouts.py::test_server_lifetime | test_timeouts.py::test_server_idle_timeout | \
        test_timeouts.py::test_server_lifetime_per_pool | \
        test_ssl.py::test_servers_no_disconnect_on_reload_with_no_tls_change | \
        test_ssl.py::test_servers_disconnect_when_changing_tls_config | \
        test_ssl.py::test_servers_disconnect_when_enabling_ssl | \
        test_ssl.py::test_servers_disconnect_when_changing_sslmode)
        echo "counts backends while the lock-function discovery's side connection (about 50 ms after a database's first login) is open"
        ;;
    *) return 1 ;;
    esac
}

# ---------------------------------------------------------------------------------------------
# What the harness and the build need, from Debian.
need_packages() {
    local missing=() p
    for p in python3-pytest python3-pytest-asyncio python3-pytest-timeout python3-filelock \
        python3-psycopg libevent-dev libc-ares-dev libsystemd-dev pkg-config dpkg-dev; do
        dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
    done
    ((${#missing[@]})) || return 0
    pgt_is_root || pgt_die "missing packages: ${missing[*]}"
    pgt_log "installing ${missing[*]}"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}" >"$work/apt-install.log" 2>&1 ||
        { cat "$work/apt-install.log" >&2; pgt_die "apt-get install failed"; }
}

# The sources: Debian 13's pgbouncer source package, through a private apt configuration, built.
fetch_and_build() {
    local apt="$work/apt" src="$work/src"
    [[ -f $src/.complete ]] && return 0
    pgt_log "fetching PgBouncer $debian_version (Debian 13 source package) into $src"
    rm -rf "$apt" "$src"
    mkdir -p "$apt/lists/partial" "$apt/cache/archives/partial" "$apt/sources.list.d" "$src"
    cat >"$apt/sources.list" <<EOF
deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian trixie main
deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian-security trixie-security main
EOF
    local apt_options=(
        -o "Dir::Etc::SourceList=$apt/sources.list"
        -o "Dir::Etc::SourceParts=$apt/sources.list.d"
        -o "Dir::State::Lists=$apt/lists"
        -o "Dir::Cache=$apt/cache"
    )
    pgt_is_root && apt_options+=(-o "APT::Sandbox::User=root")
    apt-get -q "${apt_options[@]}" update >"$apt/update.log" 2>&1 ||
        { cat "$apt/update.log" >&2; pgt_die "apt-get update (private configuration) failed"; }
    (cd "$src" && apt-get -q "${apt_options[@]}" source "pgbouncer=$debian_version") \
        >"$apt/source.log" 2>&1 ||
        { cat "$apt/source.log" >&2; pgt_die "apt-get source pgbouncer=$debian_version failed"; }
    local tree="$src/pgbouncer-$pgbouncer_version"
    [[ -f $tree/test/conftest.py ]] || pgt_die "the source package has no test/conftest.py"
    pgt_log "building PgBouncer $pgbouncer_version (the reference, and the harness's config.mak)"
    (cd "$tree" && ./configure --with-cares --with-systemd && make -j2) >"$src/build.log" 2>&1 ||
        { tail -n 30 "$src/build.log" >&2; pgt_die "building PgBouncer $pgbouncer_version failed"; }
    ln -sfn "pgbouncer-$pgbouncer_version" "$src/tree"
    touch "$src/.complete"
}

need_packages
fetch_and_build
if ((reference)); then
    binary="$work/src/tree/pgbouncer"
    label="pgbouncer-$pgbouncer_version"
else
    [[ -x $binary ]] || pgt_die "$binary is not an executable (build first, or pass --binary)"
    label="$(basename "$binary")"
fi
binary="$(readlink -f "$binary")"
results="$work/results/$label"
rm -rf "$results"
mkdir -p "$results"
chmod 0777 "$results"

# Runs the harness (as root inside the namespaces, or as the current user): the tree copied with
# the binary as ../pgbouncer, pytest as the daemon user with a clean environment. Arguments: TREE
# BINARY RESULT_DIR TIMEOUT ISOLATED PYTEST_ARGS...
# shellcheck disable=SC2016  # expanded by the inner shell
inner_script='
tree=$1 binary=$2 result_dir=$3 limit=$4 isolated=$5; shift 5
if [ "$isolated" = 1 ]; then
    ip link set lo up || exit 90
    mount -t tmpfs -o mode=1777 tmpfs /tmp || exit 90
    printf "127.0.0.1 localhost\n::1 localhost\n" >/tmp/.hosts && mount --bind /tmp/.hosts /etc/hosts
fi
run=/tmp/pgbouncer-pytest-tree
rm -rf "$run"
cp -a "$tree/." "$run" && rm -f "$run/pgbouncer" && cp "$binary" "$run/pgbouncer" || exit 90
as_user=""
if [ "$(id -u)" = 0 ]; then
    chown -R "$PGT_DAEMON_USER:$PGT_DAEMON_USER" "$run"
    as_user="setpriv --reuid=$PGT_DAEMON_USER --regid=$PGT_DAEMON_USER --init-groups --reset-env --"
fi
cd "$run/test" || exit 90
[ $# -gt 0 ] || set -- .
timeout --kill-after=10 "$limit" $as_user \
    env PATH="$PG_BIN:/usr/local/bin:/usr/bin:/bin" HOME="$run" LOGNAME="$PGT_DAEMON_USER" \
    LC_ALL=C.UTF-8 HAVE_IPV6_LOCALHOST=1 USER=compat-runner \
    python3 -m pytest -p no:cacheprovider --tb=native --junitxml="$result_dir/junit.xml" "$@"
status=$?
cp test.log "$result_dir/pooler.log" 2>/dev/null
exit $status
'

isolated=0
runner=(sh -c "$inner_script" inner)
if pgt_is_root; then
    if unshare --net --mount --pid --fork --propagation private true 2>/dev/null; then
        isolated=1
        runner=(unshare --net --mount --pid --fork --kill-child --mount-proc --propagation private
            "${runner[@]}")
    else
        pgt_warn "unshare is not available: the run shares this machine's port 6667 and /tmp"
    fi
fi

pgt_log "running PgBouncer $pgbouncer_version's pytest suite on $label" \
    "($("$binary" --version 2>&1 | head -n 1)); output in $results"
set +e
PG_BIN="$PG_BIN" PGT_DAEMON_USER="$PGT_DAEMON_USER" "${runner[@]}" "$work/src/tree" "$binary" \
    "$results" "$timeout_seconds" "$isolated" "${pytest_args[@]}" >"$results/pytest.txt" 2>&1
status=$?
set -e
((status == 124 || status == 137)) && pgt_warn "the run hit --timeout ($timeout_seconds s)"
[[ -f $results/junit.xml ]] || { tail -n 40 "$results/pytest.txt" >&2; pgt_die "pytest left no report"; }

# One line per test from the junit report: VERDICT FILE::NAME.
python3 - "$results/junit.xml" >"$results/verdicts.txt" <<'EOF'
import sys
import xml.etree.ElementTree as ET

# A test that failed and also failed its teardown is reported twice: once, failed.
verdicts = {}
for case in ET.parse(sys.argv[1]).getroot().iter("testcase"):
    name = case.get("classname", "").split(".")[-1] + ".py::" + case.get("name", "")
    kinds = {child.tag for child in case}
    if "failure" in kinds or "error" in kinds:
        verdict = "FAIL"
    elif "skipped" in kinds:
        verdict = "SKIP"
    else:
        verdict = "PASS"
    if verdicts.get(name) != "FAIL":
        verdicts[name] = verdict
for name, verdict in verdicts.items():
    print(verdict, name)
EOF

passed=0 failed=0 skipped=0 expected=0
failures=()
while read -r verdict name; do
    reason=""
    if reason="$(known_exception "$name")"; then
        case "$verdict" in
        FAIL) verdict=XFAIL ;;
        PASS) verdict=XPASS ;;
        esac
    fi
    printf '%-6s %s%s\n' "$verdict" "$name" "${reason:+  ($reason)}"
    case "$verdict" in
    PASS | XPASS) passed=$((passed + 1)) ;;
    SKIP) skipped=$((skipped + 1)) ;;
    XFAIL) expected=$((expected + 1)) ;;
    *) failed=$((failed + 1)); failures+=("$name") ;;
    esac
done <"$results/verdicts.txt"

((passed + failed + skipped + expected)) ||
    { tail -n 20 "$results/pytest.txt" >&2; pgt_die "no test ran"; }
if ((${#failures[@]})); then
    printf '\nfailed (pytest output: %s/pytest.txt):\n' "$results"
    printf '  %s\n' "${failures[@]}"
fi
printf '%d passed, %d failed, %d skipped, %d known exceptions\n' \
    "$passed" "$failed" "$skipped" "$expected"
((failed == 0))
