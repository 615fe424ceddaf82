#!/usr/bin/env bash
# The Debian package, end to end (issue 29): build it from the repository with
# `dpkg-buildpackage -b -us -uc`, check it with lintian, install it with apt, check its files, run
# pgtether the way its systemd unit does (the unit's ExecStart line as the unit's User=; there is no
# systemd in CI), connect with psql through it to the suite's throwaway PostgreSQL (TCP and the
# packaged Unix socket directory), rotate its log with the packaged logrotate file, stop it with
# the unit's KillSignal, then purge the package and check that nothing of it is left.
#
# Usage: package_test.sh SOURCE_DIR     (PGT_ENV_FILE: the suite's PostgreSQL)
# The package is built from a copy of the sources in $PGT_PACKAGE_WORK (default
# /var/tmp/pgtether-package; one run at a time, flock): the same path whichever checkout runs
# the test, so that ccache (used when installed) compiles only what changed since the last run,
# also in CI's fresh clone. The copy is deleted after a successful run. Needs root (dpkg);
# otherwise prints "package test skipped: ..." (ctest reports it as skipped).
# shellcheck disable=SC2016  # the single-quoted bash -c checks expand in their own shell
set -euo pipefail
src="$1"
work="${PGT_PACKAGE_WORK:-/var/tmp/pgtether-package}"

# shellcheck source=scripts/lib/deps.sh
source "$src/scripts/lib/deps.sh"

if ! pgt_is_root; then
    echo "package test skipped: installing a .deb needs root"
    exit 0
fi
if pgt_pkg_installed pgtether || [[ -e /etc/pgtether ]]; then
    pgt_die "pgtether is already installed on this machine (or /etc/pgtether exists): not touching it"
fi
for tool in dpkg-buildpackage dh lintian logrotate; do
    command -v "$tool" >/dev/null || pgt_die "$tool is missing (scripts/lib/deps.sh installs it)"
done
# shellcheck source=/dev/null
source "${PGT_ENV_FILE:?PGT_ENV_FILE names the suite PostgreSQL pg.env}"

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

mkdir -p "$(dirname "$work")"
exec 9>"$work.lock"
flock -w 1800 9 || pgt_die "another package test holds $work.lock"

user_existed=0
id pgtether >/dev/null 2>&1 && user_existed=1
daemon_pid=""
installed=0
# shellcheck disable=SC2317  # invoked by the trap
cleanup() {
    if [[ -n $daemon_pid ]] && pgt_pid_alive "$daemon_pid"; then pgt_stop_pid "$daemon_pid" 10; fi
    if ((installed)); then
        env DEBIAN_FRONTEND=noninteractive apt-get purge -y -q -o DPkg::Lock::Timeout=120 pgtether \
            >/dev/null 2>&1 || true
    fi
    if ((!user_existed)) && id pgtether >/dev/null 2>&1; then
        deluser --system --quiet pgtether >/dev/null 2>&1 || true
    fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# ---- build ----
version="$(sed -n '1s/^pgtether (\([^)]*\)).*/\1/p' "$src/debian/changelog")"
tree="$work/pgtether-$version"
rm -rf "$work"
mkdir -p "$tree"
if git -C "$src" rev-parse --git-dir >/dev/null 2>&1; then
    # Tracked and new (not ignored) files: what a commit of this tree would hold.
    git -C "$src" ls-files -z --cached --others --exclude-standard |
        (cd "$src" && { xargs -0 cp --parents -t "$tree" 2>/dev/null || true; })
else
    tar -C "$src" --exclude='./build*' --exclude=./.git -cf - . | tar -C "$tree" -xf -
fi
if [[ -z ${CMAKE_CXX_COMPILER_LAUNCHER:-} ]] && command -v ccache >/dev/null; then
    export CMAKE_CXX_COMPILER_LAUNCHER=ccache CMAKE_C_COMPILER_LAUNCHER=ccache
fi
if [[ ${CMAKE_CXX_COMPILER_LAUNCHER:-} == *ccache* && -z ${CCACHE_DIR:-} ]]; then
    # debhelper (compat 13) gives the build a throwaway HOME inside the tree, so ccache's default
    # cache ($HOME/.cache/ccache) would start empty every run and be deleted with the tree: the
    # whole daemon was recompiled each time (600 s on the loaded 2-core machine). Name the
    # caller's cache so that only what changed is compiled.
    CCACHE_DIR="$(ccache -k cache_dir)"
    export CCACHE_DIR
fi
begin=$SECONDS
# noautodbgsym: no pgtether-dbgsym package, which nothing here installs or checks, and whose 20 MB
# of debug info took dpkg-deb two minutes to compress. For the same reason the debug info is not
# generated at all (DEB_CXXFLAGS_STRIP, dpkg-buildflags' user override; a real package build
# keeps -g): a third less compiler time, the test's largest cost. The binary is stripped anyway.
if ! (cd "$tree" && DEB_BUILD_OPTIONS="parallel=2 nocheck noautodbgsym" DEB_CFLAGS_STRIP=-g \
    DEB_CXXFLAGS_STRIP=-g dpkg-buildpackage -b -us -uc) \
    >"$work/build.log" 2>&1; then
    tail -n 60 "$work/build.log"
    pgt_die "dpkg-buildpackage failed (log above: $work/build.log)"
fi
arch="$(dpkg --print-architecture)"
deb="$work/pgtether_${version}_${arch}.deb"
changes="$work/pgtether_${version}_${arch}.changes"
echo "built $deb in $((SECONDS - begin)) s"

# ---- lintian: no error, no warning (overrides, each with its reason, in debian/*lintian-overrides) ----
lintian_out="$(lintian --fail-on error,warning --display-info "$changes" 2>&1)" && lintian_rc=0 || lintian_rc=$?
[[ -z $lintian_out ]] || printf '%s\n' "$lintian_out" | sed 's/^/lintian: /'
check "lintian: no errors or warnings" test "$lintian_rc" -eq 0

# ---- contents of the .deb ----
contents="$(dpkg-deb -c "$deb" | awk '{print $6}' | sed 's#^\./#/#')"
for f in /usr/sbin/pgtether /etc/pgtether/pgtether.ini /etc/pgtether/userlist.txt \
    /lib/systemd/system/pgtether.service /etc/logrotate.d/pgtether /usr/share/man/man1/pgtether.1.gz \
    /usr/share/doc/pgtether/copyright /usr/lib/tmpfiles.d/pgtether.conf; do
    check "the package holds $f" grep -qx "$f" <<<"$contents"
done
check "the package holds the docs in /usr/share/doc/pgtether" \
    grep -q '^/usr/share/doc/pgtether/deployment.md' <<<"$contents"

# ---- install ----
(PGT_APT_NO_UPDATE=1 pgt_apt_install_no_start "$deb") >"$work/install.log" 2>&1 || {
    cat "$work/install.log"
    pgt_die "apt-get install $deb failed"
}
installed=1
check "/usr/sbin/pgtether -V prints the version" \
    grep -q "^pgtether $version" <<<"$(/usr/sbin/pgtether -V)"
check "pgtether is a system user with no login shell" \
    bash -c '(( $(id -u pgtether) < 1000 )) && [[ $(getent passwd pgtether | cut -d: -f7) == */nologin ]]'
conffiles="$(dpkg-query -W -f='${Conffiles}\n' pgtether)"
for f in /etc/pgtether/pgtether.ini /etc/pgtether/userlist.txt /etc/logrotate.d/pgtether; do
    check "$f is a conffile" grep -q "^ $f " <<<"$conffiles"
done
check "the userlist is root:pgtether 0640 and knows no user yet" \
    bash -c '[[ $(stat -c %U:%G:%a /etc/pgtether/userlist.txt) == root:pgtether:640 ]] &&
             ! grep -q "^\"" /etc/pgtether/userlist.txt'
check "/run/pgtether (tmpfiles.d) and /var/log/pgtether belong to pgtether" \
    bash -c '[[ $(stat -c %U /run/pgtether) == pgtether && $(stat -c %U /var/log/pgtether) == pgtether ]]'
check "the copyright names the PostgreSQL Licence" grep -q '^License: PostgreSQL' /usr/share/doc/pgtether/copyright
check "man pgtether renders without warnings" \
    bash -c 'out="$(man --warnings -l /usr/share/man/man1/pgtether.1.gz 2>&1 >/dev/null)"; [[ -z $out ]]'
unit=/lib/systemd/system/pgtether.service
if command -v systemd-analyze >/dev/null; then
    verify="$(systemd-analyze verify "$unit" 2>&1 | grep -v 'Failed to connect\|not been booted' || true)"
    [[ -z $verify ]] || printf '%s\n' "$verify" | sed 's/^/systemd-analyze: /'
    check "systemd-analyze verify: the unit is clean" test -z "$verify"
fi
check "the unit is Type=notify as User=pgtether with LimitNOFILE" \
    bash -c "grep -qx Type=notify $unit && grep -qx User=pgtether $unit && grep -q '^LimitNOFILE=' $unit"

# ---- configure it as an operator would: the packaged files, edited ----
port="$(pgt_free_port)"
ini=/etc/pgtether/pgtether.ini
sed -i -e "s|^app = .*|app = host=$PGT_PG_HOST port=$PGT_PG_PORT dbname=$PGT_PG_DATABASE|" \
    -e "s|^listen_port = .*|listen_port = $port|" "$ini"
printf '"postgres" "pkg-test-secret"\n' >>/etc/pgtether/userlist.txt

# ---- start it as the unit does ----
exec_start="$(sed -n 's/^ExecStart=//p' "$unit")"
unit_user="$(sed -n 's/^User=//p' "$unit")"
unit_group="$(sed -n 's/^Group=//p' "$unit")"
limit_nofile="$(sed -n 's/^LimitNOFILE=//p' "$unit")"
echo "ExecStart: $exec_start (as $unit_user:$unit_group, LimitNOFILE=$limit_nofile)"
read -r -a argv <<<"$exec_start"
(
    cd /
    # As systemd's LimitNOFILE= would; a container may cap the hard limit below it.
    ulimit -n "$limit_nofile" 2>/dev/null || ulimit -n "$(ulimit -Hn)"
    exec setsid setpriv --reuid="$unit_user" --regid="$unit_group" --init-groups --reset-env -- \
        "${argv[@]}" </dev/null >"$work/stderr.log" 2>&1
) &
daemon_pid=$!
if ! pgt_wait_for_port 127.0.0.1 "$port" 15 "$daemon_pid"; then
    cat "$work/stderr.log" /var/log/pgtether/pgtether.log 2>/dev/null || true
    pgt_die "pgtether from the package did not start"
fi
check "it runs as pgtether" bash -c "[[ \$(ps -o user= -p $daemon_pid) == pgtether ]]"
check "it wrote its pidfile" bash -c "[[ \$(cat /run/pgtether/pgtether.pid) == $daemon_pid ]]"

psql_through() {
    PGPASSWORD=pkg-test-secret "$PGT_PG_BIN/psql" -X -q -A -t -h "$1" -p "$port" -U postgres app -c "$2" 2>&1
}
check "psql over TCP: a query through pgtether" \
    test "$(psql_through 127.0.0.1 "SELECT 6 * 7, current_database()")" = "42|$PGT_PG_DATABASE"
check "psql over TCP: a session advisory lock and its release" \
    test "$(psql_through 127.0.0.1 "SELECT pg_advisory_lock(29) IS NOT NULL, pg_advisory_unlock(29)")" = "t|t"
check "psql over the Unix socket in /run/pgtether" \
    test "$(psql_through /run/pgtether "SELECT 1")" = "1"
wrong="$(PGPASSWORD=wrong "$PGT_PG_BIN/psql" -X -h 127.0.0.1 -p "$port" -U postgres app -c 'SELECT 1' 2>&1 || true)"
check "a wrong password is refused (the packaged userlist is used)" grep -q 'password authentication failed' <<<"$wrong"
check "it logs to /var/log/pgtether/pgtether.log" test -s /var/log/pgtether/pgtether.log

# ---- logrotate with the packaged file: the log moves, pgtether reopens a new one on SIGHUP ----
logrotate -f -s "$work/logrotate.state" /etc/logrotate.d/pgtether
check "logrotate moved the log to pgtether.log.1" test -s /var/log/pgtether/pgtether.log.1
psql_through 127.0.0.1 "SELECT 1" >/dev/null
sleep 0.5
check "after the rotation (SIGHUP) pgtether writes a new pgtether.log" test -s /var/log/pgtether/pgtether.log

# ---- stop as the unit does (KillSignal) ----
kill_signal="$(sed -n 's/^KillSignal=//p' "$unit")"
kill -s "${kill_signal#SIG}" "$daemon_pid"
deadline=$((SECONDS + 15))
while pgt_pid_alive "$daemon_pid" && ((SECONDS < deadline)); do sleep 0.1; done
check "$kill_signal stops it" bash -c "! kill -0 $daemon_pid 2>/dev/null"
wait "$daemon_pid" 2>/dev/null || true
daemon_pid=""

# ---- purge: nothing left ----
env DEBIAN_FRONTEND=noninteractive apt-get purge -y -q -o DPkg::Lock::Timeout=120 pgtether >"$work/purge.log" 2>&1
installed=0
check "purged: dpkg knows no pgtether" bash -c "! dpkg-query -W -f='\${db:Status-Status}' pgtether 2>/dev/null | grep -q ."
for path in /usr/sbin/pgtether /etc/pgtether /var/log/pgtether /run/pgtether /lib/systemd/system/pgtether.service \
    /etc/logrotate.d/pgtether /usr/share/doc/pgtether /etc/systemd/system/multi-user.target.wants/pgtether.service; do
    check "purged: $path is gone" test ! -e "$path"
done

if ((fail == 0)); then
    rm -rf "$work"
    echo "package: all checks passed"
fi
exit "$fail"
