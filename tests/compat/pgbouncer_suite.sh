#!/usr/bin/env bash
# PgBouncer 1.18's own test suite, run against pgtether (or, for reference, PgBouncer itself).
#
#   tests/compat/pgbouncer_suite.sh [--binary PATH] [--work DIR] [--timeout SECONDS]
#                                   [--suite main|ssl|all] [TEST_NAME...]
#
#   --binary   the program put in the place of `pgbouncer` (default: build/proxy/pgtether;
#              /usr/sbin/pgbouncer gives PgBouncer's own result for comparison)
#   --work     where the sources, the run trees and the per-test logs go
#              (default: $PGT_BUILD_DIR/compat, i.e. build/compat)
#   --timeout  bound on each test, PostgreSQL start-up included (default 180 s)
#   --suite    test/test.sh (main), test/ssl/test.sh (ssl) or both (all, the default)
#   TEST_NAME  run only these tests (e.g. test_show_version test_client_ssl)
#
# The sources come from Debian: `apt-get source pgbouncer` with a deb-src entry in a private apt
# configuration under the work directory (the system's apt sources and lists are not touched);
# they are fetched once and reused. The harness and its ini files run unmodified: the binary is
# copied to the tree's top directory, where the harness runs `../pgbouncer` (`../../pgbouncer` for
# the TLS suite). Every test runs on its own: a fresh copy of the tree, its own test.sh invocation
# (so its own initdb and PostgreSQL), bounded by --timeout.
#
# The harness wants fixed ports (6666 PostgreSQL, 6667 the pooler) and Unix sockets in /tmp. When
# run as root each test therefore gets private namespaces (unshare: network with its own loopback,
# so ::1 exists and nothing collides with other programs; mounts, with a private tmpfs on /tmp
# that also holds the tree, so PostgreSQL's fsyncs cost nothing, and an /etc/hosts naming ::1
# localhost too, for the host-list test; PIDs, so everything a test started dies with it) and the
# harness runs as the `postgres` user (initdb refuses root; the admin console login as
# `pgbouncer` relies on the client and the pooler being the same OS user) with USER set to a name
# that is not in test/userlist.txt, as on a developer's machine: the harness then adds its
# long-password user, which test_password_server/_client need. Not as root, it runs as the
# current user without isolation. Isolated, HAVE_IPV6_LOCALHOST=1 is set (test_host_list);
# USE_SUDO is not (the three iptables tests skip themselves).
#
# Output: one line per test (PASS, FAIL, SKIP, TIMEOUT, or XFAIL for the known exceptions listed in
# known_exception below, each with its reason), then "N passed, N failed, ..." . The exit status is
# 0 when nothing failed other than the known exceptions. Logs of every test (the harness's .out,
# the pooler's log, PostgreSQL's log) are kept in WORK/results/SUITE/TEST/.
set -euo pipefail

# shellcheck source=scripts/lib/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib/common.sh"

binary="${PGT_BUILD_DIR:-$PGT_ROOT/build}/proxy/pgtether"
work="${PGT_BUILD_DIR:-$PGT_ROOT/build}/compat"
timeout_seconds=180
suites=(main ssl)
only=()

usage() {
    sed -n '4,12p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
    exit 2
}

while (($#)); do
    case "$1" in
    --binary) binary="$2"; shift 2 ;;
    --work) work="$2"; shift 2 ;;
    --timeout) timeout_seconds="$2"; shift 2 ;;
    --suite)
        case "$2" in
        main | ssl) suites=("$2") ;;
        all) suites=(main ssl) ;;
        *) usage ;;
        esac
        shift 2
        ;;
    -h | --help) usage ;;
    -*) usage ;;
    *) only+=("$1"); shift ;;
    esac
done

[[ -x $binary ]] || pgt_die "$binary is not an executable (build first, or pass --binary)"
binary="$(readlink -f "$binary")"
mkdir -p "$work"
work="$(readlink -f "$work")"

PG_BIN="${PGT_PG_BIN:-/usr/lib/postgresql/15/bin}"
[[ -x $PG_BIN/initdb ]] || pgt_die "PostgreSQL binaries not found in $PG_BIN (set PGT_PG_BIN)"

# Tests that need what pgtether does not do, with the reason. They run, and are reported as XFAIL
# when they fail (and as XPASS, counted as passed, if they ever pass).
known_exception() {
    case "$1" in
    test_online_restart)
        echo "online restart (-R: takes over the old process's sockets) is not supported"
        ;;
    test_scram_takeover)
        # It passes all the same: -R is refused and the old process keeps serving the client.
        echo "online restart (-R) is not supported"
        ;;
    *) return 1 ;;
    esac
}

# ---------------------------------------------------------------------------------------------
# The sources: Debian's pgbouncer source package, through a private apt configuration.
fetch_sources() {
    local apt="$work/apt" src="$work/src"
    if [[ -f $src/.complete ]]; then
        return 0
    fi
    command -v dpkg-source >/dev/null || pgt_die "dpkg-source is needed (apt-get install dpkg-dev)"
    pgt_log "fetching PgBouncer's Debian source package into $src"
    rm -rf "$apt" "$src"
    mkdir -p "$apt/lists/partial" "$apt/cache/archives/partial" "$apt/sources.list.d" "$src"
    # The Debian release of the installed system, bookworm for Debian 12 (PgBouncer 1.18).
    local codename
    # shellcheck disable=SC1091
    codename="$(. /etc/os-release && echo "${VERSION_CODENAME:-bookworm}")"
    cat >"$apt/sources.list" <<EOF
deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian $codename main
deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian-security $codename-security main
EOF
    local apt_options=(
        -o "Dir::Etc::SourceList=$apt/sources.list"
        -o "Dir::Etc::SourceParts=$apt/sources.list.d"
        -o "Dir::State::Lists=$apt/lists"
        -o "Dir::Cache=$apt/cache"
        -o "APT::Sandbox::User=root"
    )
    pgt_is_root || apt_options=("${apt_options[@]:0:8}")
    apt-get -q "${apt_options[@]}" update >"$apt/update.log" 2>&1 ||
        { cat "$apt/update.log" >&2; pgt_die "apt-get update (private configuration) failed"; }
    (cd "$src" && apt-get -q "${apt_options[@]}" source pgbouncer) >"$apt/source.log" 2>&1 ||
        { cat "$apt/source.log" >&2; pgt_die "apt-get source pgbouncer failed"; }
    local tree
    tree="$(find "$src" -mindepth 1 -maxdepth 1 -type d -name 'pgbouncer-*' | head -n 1)"
    [[ -n $tree && -f $tree/test/test.sh && -f $tree/test/ssl/test.sh ]] ||
        pgt_die "the source package has no test/test.sh and test/ssl/test.sh"
    ln -sfn "$(basename "$tree")" "$src/tree"
    touch "$src/.complete"
}

# The test names of a suite, in the harness's own order (its `testlist`).
list_tests() {
    local script="$1"
    sed -n '/^testlist="/,/^"/p' "$script" | grep -E '^test_[a-z0-9_]+$'
}

# ---------------------------------------------------------------------------------------------
# One test: fresh tree, own namespaces, as the daemon user, bounded in time.
isolate=0
if pgt_is_root; then
    if unshare --net --mount --pid --fork --propagation private true 2>/dev/null; then
        isolate=1
    else
        pgt_warn "unshare is not available: tests share this machine's ports 6666/6667 and /tmp"
    fi
fi

# Runs inside the namespaces (as root): loopback up with ::1 as a name for localhost (as on most
# machines; the harness's host-list test connects to both), a private tmpfs on /tmp (Unix sockets
# and the tree itself: PostgreSQL's fsyncs cost nothing there), the harness as the daemon user
# with a clean environment, then its logs copied out. Arguments: TREE BINARY RESULT_DIR
# SCRIPT_DIR TIMEOUT TEST_NAME.
# shellcheck disable=SC2016  # expanded by the inner shell
inner_script='
tree=$1 binary=$2 result_dir=$3 script_dir=$4 limit=$5 name=$6
ip link set lo up || exit 90
mount -t tmpfs -o mode=1777 tmpfs /tmp || exit 90
printf "127.0.0.1 localhost\n::1 localhost\n" >/tmp/.hosts && mount --bind /tmp/.hosts /etc/hosts
run=/tmp/pgbouncer-tree
cp -a "$tree/." "$run" && cp "$binary" "$run/pgbouncer" || exit 90
chown -R "$PGT_DAEMON_USER:$PGT_DAEMON_USER" "$run"
cd "$run/$script_dir" || exit 90
timeout --kill-after=5 "$limit" \
    setpriv --reuid="$PGT_DAEMON_USER" --regid="$PGT_DAEMON_USER" --init-groups --reset-env -- \
    env PATH="$PG_BIN:/usr/local/bin:/usr/bin:/bin" HOME="$PWD" \
    LOGNAME="$PGT_DAEMON_USER" LC_ALL=C HAVE_IPV6_LOCALHOST=1 USER=compat-runner ./test.sh "$name"
status=$?
cp -a log/. "$result_dir/" 2>/dev/null
[ -f test.log ] && cp test.log "$result_dir/$name.log"
exit $status
'

run_one() {
    local suite="$1" name="$2" script_dir result_dir started status line verdict
    case "$suite" in
    main) script_dir="test" ;;
    ssl) script_dir="test/ssl" ;;
    esac
    result_dir="$work/results/$suite/$name"
    rm -rf "$result_dir"
    mkdir -p "$result_dir"

    started=$SECONDS
    set +e
    if ((isolate)); then
        PG_BIN="$PG_BIN" PGT_DAEMON_USER="$PGT_DAEMON_USER" \
            timeout --kill-after=10 "$((timeout_seconds + 60))" \
            unshare --net --mount --pid --fork --kill-child --mount-proc --propagation private \
            sh -c "$inner_script" inner "$work/src/tree" "$binary" "$result_dir" "$script_dir" \
            "$timeout_seconds" "$name" >"$result_dir/harness.txt" 2>&1
        status=$?
    else
        local run_dir="$work/run/$suite-$name"
        rm -rf "$run_dir"
        mkdir -p "$work/run"
        cp -a "$work/src/tree/." "$run_dir"
        cp "$binary" "$run_dir/pgbouncer"
        (cd "$run_dir/$script_dir" &&
            PATH="$PG_BIN:$PATH" timeout --kill-after=10 "$timeout_seconds" ./test.sh "$name") \
            >"$result_dir/harness.txt" 2>&1
        status=$?
        cp -a "$run_dir/$script_dir/log/." "$result_dir/" 2>/dev/null
        rm -rf "$run_dir"
    fi
    set -e
    local elapsed=$((SECONDS - started))

    # The harness prints "<date> running NAME ... ok|skipped|FAILED".
    line="$(grep -E "running $name \.\.\. " "$result_dir/harness.txt" | tail -n 1 || true)"
    if ((status == 124 || status == 137)); then
        verdict=TIMEOUT
    elif [[ $line == *"... ok" ]] && ((status == 0)); then
        verdict=PASS
    elif [[ $line == *"... skipped" ]] && ((status == 0)); then
        verdict=SKIP
    else
        verdict=FAIL
    fi

    local reason=""
    if reason="$(known_exception "$name")"; then
        case "$verdict" in
        FAIL | TIMEOUT) verdict=XFAIL ;;
        PASS) verdict=XPASS ;;
        esac
    fi
    printf '%-8s %-4s %-52s %4ds%s\n' "$verdict" "$suite" "$name" "$elapsed" \
        "${reason:+  ($reason)}"
    case "$verdict" in
    PASS | XPASS) passed=$((passed + 1)) ;;
    SKIP) skipped=$((skipped + 1)) ;;
    XFAIL) expected=$((expected + 1)) ;;
    *)
        failed=$((failed + 1))
        failures+=("$suite/$name")
        ;;
    esac
}

fetch_sources
pgt_log "running $(basename "$binary") ($("$binary" --version | head -n 1)) in the place of pgbouncer; logs in $work/results"

passed=0 failed=0 skipped=0 expected=0
failures=()
for suite in "${suites[@]}"; do
    case "$suite" in
    main) script="$work/src/tree/test/test.sh" ;;
    ssl) script="$work/src/tree/test/ssl/test.sh" ;;
    esac
    mapfile -t tests < <(list_tests "$script")
    for name in "${tests[@]}"; do
        if ((${#only[@]})); then
            wanted=0
            for pick in "${only[@]}"; do [[ $pick == "$name" ]] && wanted=1; done
            ((wanted)) || continue
        fi
        run_one "$suite" "$name"
    done
done

if ((${#failures[@]})); then
    printf '\nfailed: %s\n' "${failures[*]}"
    printf 'logs: %s/results/SUITE/TEST/ (harness.txt, TEST.out, TEST.log, pg.log)\n' "$work"
fi
printf '%d passed, %d failed, %d skipped, %d known exceptions\n' \
    "$passed" "$failed" "$skipped" "$expected"
((failed == 0))
