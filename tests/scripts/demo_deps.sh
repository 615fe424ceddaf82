#!/usr/bin/env bash
# What scripts/demo touches on a newcomer's machine (issue 29, "Must hold"):
#   1. the demo's package set (scripts/lib/deps.sh --demo) holds no test-only package, and the test
#      set includes it;
#   2. the demo's build configures without the test suite's libraries: a fresh build directory with
#      PGTETHER_TESTS=OFF and doctest made unfindable still has the pgtether target;
#   3. the service finder that disables packages' services at boot after an install sees the
#      systemd units and SysV scripts of installed packages (pgbouncer, haproxy, postgresql-common).
# Usage: demo_deps.sh SOURCE_DIR
set -euo pipefail
src="$1"
fail=0
no() {
    printf 'FAIL: %s\n' "$*"
    fail=1
}

mapfile -t demo < <("$src/scripts/lib/deps.sh" --list --demo)
mapfile -t full < <("$src/scripts/lib/deps.sh" --list)
((${#demo[@]} > 0)) || no "deps.sh --list --demo printed nothing"
# Membership by lookup table, not `printf | grep -q`: under pipefail, grep -q leaving at the first
# match can kill printf with SIGPIPE and fail the pipeline although the package is listed.
declare -A in_demo=() in_full=()
for pkg in "${demo[@]}"; do in_demo[$pkg]=1; done
for pkg in "${full[@]}"; do in_full[$pkg]=1; done
for pkg in pgbouncer haproxy nftables doctest-dev libpq-dev python3-psycopg postgresql-contrib; do
    [[ -n ${in_demo[$pkg]:-} ]] && no "the demo installs the test dependency $pkg"
done
for pkg in "${demo[@]}"; do
    [[ -n ${in_full[$pkg]:-} ]] || no "scripts/test does not install the demo's $pkg"
done
grep -qx pgbouncer <<<"$("$src/scripts/lib/deps.sh" --list --demo --pgbouncer)" ||
    no "PGT_DEMO_POOLER=pgbouncer does not get pgbouncer"

build="$(mktemp -d)"
trap 'rm -rf "$build"' EXIT
if cmake -S "$src" -B "$build" -DPGTETHER_TESTS=OFF -DCMAKE_DISABLE_FIND_PACKAGE_doctest=ON \
    >"$build/configure.log" 2>&1; then
    targets="$(cmake --build "$build" --target help)"
    grep -qx '\.\.\. pgtether' <<<"$targets" || no "the demo's configuration has no pgtether target"
    grep -q 'unit_tests\|test_' <<<"$targets" && no "the demo's configuration builds tests"
    grep -q 'doctest_DIR\|LIBPQ_FOUND:INTERNAL=1' "$build/CMakeCache.txt" &&
        no "the demo's configuration still looks for doctest or libpq"
else
    cat "$build/configure.log"
    no "configuring without the tests (and without doctest) failed"
fi

# shellcheck source=scripts/lib/deps.sh
source "$src/scripts/lib/deps.sh"
services="$(pgt_package_services pgbouncer haproxy postgresql-common)"
for want in "systemd pgbouncer.service" "sysv pgbouncer" "systemd haproxy.service" \
    "systemd postgresql.service"; do
    grep -qx "$want" <<<"$services" || no "pgt_package_services misses '$want' (got: $services)"
done
# Template units are enabled per instance, never by a postinst.
grep -q '@' <<<"$services" && no "pgt_package_services lists a template unit: $services"

((fail == 0)) && echo "demo_deps: all checks passed"
exit "$fail"
