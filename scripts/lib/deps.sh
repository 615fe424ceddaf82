#!/usr/bin/env bash
# Install the Debian 12 packages pgtether needs to build, test, benchmark and demo, and nothing
# else: each package is checked with dpkg-query first, apt-get runs only for what is missing.
#
#   scripts/lib/deps.sh           # build + test dependencies (the demo's are a subset)
#   scripts/lib/deps.sh --demo    # only what scripts/demo needs: the pgtether build and PostgreSQL
#   scripts/lib/deps.sh --demo --pgbouncer   # the same plus PgBouncer (PGT_DEMO_POOLER=pgbouncer)
#   scripts/lib/deps.sh --fuzz    # the test set plus clang and its libFuzzer/sanitizer runtimes
#   scripts/lib/deps.sh --bench   # the test set plus liburing (tests/bench/relay_floor.cpp's io_uring mode)
#   scripts/lib/deps.sh --check [--demo|--fuzz]   # only list what is missing (exit 1 if anything is)
#   scripts/lib/deps.sh --list [--demo|--fuzz|--bench]   # print the wanted packages, one a line
#
# Packages with system services (postgresql, pgbouncer, haproxy, and whatever they pull in) are
# installed without starting them and are then disabled at boot: we run throwaway servers of our
# own, and a newcomer's machine must not gain a PgBouncer or an haproxy that starts at every boot.
#
# PGT_DEPS_SIMULATE=1 passes --simulate to apt-get install (shows what would happen, installs
# nothing).
# Run it as a command (it sets its own traps while apt-get runs).
set -euo pipefail

# shellcheck source=scripts/lib/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

# What scripts/demo needs: the pgtether target alone (PGTETHER_TESTS=OFF needs neither doctest nor
# libpq), PostgreSQL 15 (initdb, pg_ctl, psql, pgbench), ss for free ports, /proc tools.
PGT_DEPS_DEMO=(
    build-essential cmake pkg-config
    libuv1-dev libssl-dev libspdlog-dev libpam0g-dev libldap-dev
    postgresql procps iproute2
)
# Everything scripts/test needs besides the demo's set: the test code's libraries, PgBouncer and
# haproxy (reference and scale-out tests), nftables (network faults), openssl (TLS test certs),
# psycopg (the compat suite), the Debian package's build and checks (debhelper, lintian,
# logrotate: tests/scripts/package_test.sh), promtool for the alert rules (Debian ships it in
# prometheus, whose service is disabled like the others: tests/scripts/alerts_test.sh).
PGT_DEPS_TEST=(
    libpq-dev doctest-dev
    postgresql-contrib pgbouncer python3-psycopg
    openssl nftables haproxy slapd
    debhelper lintian logrotate
    prometheus
)
PGT_DEPS_CORE=("${PGT_DEPS_DEMO[@]}" "${PGT_DEPS_TEST[@]}")
# Only needed for the libFuzzer targets (PGTETHER_FUZZ=ON): clang's fuzzer and sanitizer runtimes.
PGT_DEPS_FUZZ=(clang libclang-rt-14-dev)
# Only needed by the benchmark's relay:uring target (tests/bench/compare.sh builds relay_floor.cpp
# against it); pgtether itself does not link it.
PGT_DEPS_BENCH=(liburing-dev)

pgt_pkg_installed() {
    [[ $(dpkg-query -W -f='${db:Status-Status}' "$1" 2>/dev/null || true) == installed ]]
}

# Install every package in "$@" that is not installed yet.
pgt_deps_install() {
    local missing=() pkg
    for pkg in "$@"; do
        pgt_pkg_installed "$pkg" || missing+=("$pkg")
    done
    ((${#missing[@]} == 0)) && return 0

    pgt_log "installing missing Debian packages: ${missing[*]}"
    pgt_apt_install_no_start "${missing[@]}"
}

# apt-get install "$@" (package names or ./file.deb) with no service started, and the services
# of every package it adds disabled at boot. PGT_APT_NO_UPDATE=1 skips apt-get update.
pgt_apt_install_no_start() {
    local sudo=()
    if ! pgt_is_root; then
        command -v sudo >/dev/null || pgt_die "must be root to install: $*"
        sudo=(sudo)
    fi

    # Packaging scripts of postgresql, pgbouncer and haproxy start their system services. We run our own
    # throwaway servers instead, so forbid service starts for the duration of the install
    # (invoke-rc.d and deb-systemd-invoke both honour policy-rc.d's exit status 101 = "denied").
    local policy=/usr/sbin/policy-rc.d backup=""
    if [[ -e $policy ]]; then
        backup="$(mktemp)"
        "${sudo[@]}" cp -p "$policy" "$backup"
    fi
    # shellcheck disable=SC2064  # expand now: the values are fixed for this install.
    trap "pgt_deps_restore_policy '$policy' '$backup'" EXIT
    trap 'exit 130' INT TERM
    printf '#!/bin/sh\n# pgtether deps.sh: no service starts during package installation\nexit 101\n' |
        "${sudo[@]}" tee "$policy" >/dev/null
    "${sudo[@]}" chmod 755 "$policy"

    [[ -n ${PGT_APT_NO_UPDATE:-} ]] || "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q
    local simulate=() before
    [[ -z ${PGT_DEPS_SIMULATE:-} ]] || simulate=(--simulate)
    before="$(pgt_installed_packages)"
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive \
        apt-get install -y -q --no-install-recommends -o DPkg::Lock::Timeout=120 "${simulate[@]}" "$@"

    pgt_deps_restore_policy "$policy" "$backup"
    trap - EXIT INT TERM

    # policy-rc.d kept the services from starting, but their packages still enabled them for the
    # next boot (postinst: deb-systemd-helper enable, update-rc.d defaults). Disable the services
    # of every package this install added, dependencies included (postgresql.service belongs to
    # postgresql-common); a service the admin already had is left alone.
    if [[ -z ${PGT_DEPS_SIMULATE:-} ]]; then
        local added=()
        mapfile -t added < <(comm -13 <(printf '%s\n' "$before") <(pgt_installed_packages))
        ((${#added[@]} == 0)) || pgt_deps_no_boot_start "${added[@]}"
    fi
}

# Package names of everything installed, sorted (for comm).
pgt_installed_packages() {
    dpkg-query -W -f='${db:Status-Status} ${Package}\n' | sed -n 's/^installed //p' | sort
}

# The system services packages "$@" ship: "systemd UNIT" and "sysv NAME" lines. Template units
# (foo@.service) are enabled per instance, never by a postinst, so they are skipped.
pgt_package_services() {
    dpkg-query -L "$@" 2>/dev/null | sort -u | sed -n -E \
        -e 's#^(/usr)?/lib/systemd/system/([^/@]+\.service)$#systemd \2#p' \
        -e 's#^/etc/init\.d/([^/]+)$#sysv \1#p'
}

# Disable at boot (and stop, under a running systemd) the services packages "$@" ship.
pgt_deps_no_boot_start() {
    local sudo=() kind name now=()
    pgt_is_root || sudo=(sudo)
    [[ -d /run/systemd/system ]] && now=(--now)
    while read -r kind name; do
        case "$kind" in
        systemd)
            if command -v systemctl >/dev/null; then
                # Works without a running systemd too (a container, a chroot): it removes the
                # .wants links the postinst made and syncs the SysV links.
                "${sudo[@]}" systemctl disable "${now[@]}" "$name" >/dev/null 2>&1 || true
            else
                # No systemctl, yet deb-systemd-helper made the links for a later systemd.
                "${sudo[@]}" find /etc/systemd/system -path '*.wants/*' -name "$name" -type l -delete
            fi
            ;;
        sysv)
            "${sudo[@]}" update-rc.d "$name" disable >/dev/null 2>&1 || true
            ;;
        esac
        pgt_log "disabled at boot: $name ($kind)"
    done < <(pgt_package_services "$@")
}

pgt_deps_restore_policy() {
    local policy="$1" backup="$2" sudo=()
    pgt_is_root || sudo=(sudo)
    if [[ -n $backup ]]; then
        "${sudo[@]}" cp -p "$backup" "$policy"
        rm -f "$backup"
    else
        "${sudo[@]}" rm -f "$policy"
    fi
}

pgt_deps_core() { pgt_deps_install "${PGT_DEPS_CORE[@]}"; }
pgt_deps_fuzz() { pgt_deps_install "${PGT_DEPS_FUZZ[@]}"; }

pgt_deps_missing() {
    local pkg
    for pkg in "$@"; do
        pgt_pkg_installed "$pkg" || printf '%s\n' "$pkg"
    done
}

if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
    check=0 list=0 demo=0 pgbouncer=0 fuzz=0 bench=0
    for arg in "$@"; do
        case "$arg" in
        --check) check=1 ;;
        --list) list=1 ;;
        --demo) demo=1 ;;
        --pgbouncer) pgbouncer=1 ;;
        --fuzz) fuzz=1 ;;
        --bench) bench=1 ;;
        *) pgt_die "usage: $0 [--check|--list] [--demo [--pgbouncer]|--fuzz|--bench]" ;;
        esac
    done
    if ((demo)); then
        ((fuzz + bench == 0)) || pgt_die "--demo does not combine with --fuzz or --bench"
        wanted=("${PGT_DEPS_DEMO[@]}")
        ((pgbouncer)) && wanted+=(pgbouncer)
    else
        wanted=("${PGT_DEPS_CORE[@]}")
    fi
    ((fuzz)) && wanted+=("${PGT_DEPS_FUZZ[@]}")
    ((bench)) && wanted+=("${PGT_DEPS_BENCH[@]}")
    if ((list)); then
        printf '%s\n' "${wanted[@]}"
        exit 0
    fi
    if ((check)); then
        missing_list="$(pgt_deps_missing "${wanted[@]}")"
        [[ -z $missing_list ]] || { printf "missing: %s\n" "$(tr "\n" " " <<<"$missing_list")"; exit 1; }
        exit 0
    fi
    pgt_deps_install "${wanted[@]}"
fi
