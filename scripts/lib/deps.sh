#!/usr/bin/env bash
# Install the Debian 12 packages pgtether needs to build, test, benchmark and demo, and nothing
# else: each package is checked with dpkg-query first, apt-get runs only for what is missing.
#
#   scripts/lib/deps.sh           # build + test + demo + bench dependencies
#   scripts/lib/deps.sh --fuzz    # the same plus clang and its libFuzzer/sanitizer runtimes
#   scripts/lib/deps.sh --bench   # the same plus liburing (tests/bench/relay_floor.cpp's io_uring mode)
#   scripts/lib/deps.sh --check [--fuzz]   # only list what is missing (exit 1 if anything is)
#
# PGT_DEPS_SIMULATE=1 passes --simulate to apt-get install (shows what would happen, installs
# nothing).
# Run it as a command (it sets its own traps while apt-get runs).
set -euo pipefail

# shellcheck source=scripts/lib/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

PGT_DEPS_CORE=(
    build-essential cmake pkg-config
    libuv1-dev libssl-dev libspdlog-dev libpq-dev doctest-dev
    postgresql postgresql-contrib pgbouncer python3-psycopg
    procps iproute2 openssl nftables
    haproxy
)
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
    local sudo=()
    if ! pgt_is_root; then
        command -v sudo >/dev/null || pgt_die "must be root to install: ${missing[*]}"
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

    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q
    local simulate=()
    [[ -z ${PGT_DEPS_SIMULATE:-} ]] || simulate=(--simulate)
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive \
        apt-get install -y -q --no-install-recommends "${simulate[@]}" "${missing[@]}"

    pgt_deps_restore_policy "$policy" "$backup"
    trap - EXIT INT TERM

    # On a systemd machine the units are still enabled for the next boot: disable the ones whose
    # package we just installed (a service the admin already had is left alone).
    if [[ -d /run/systemd/system && -z ${PGT_DEPS_SIMULATE:-} ]]; then
        for pkg in "${missing[@]}"; do
            case "$pkg" in
            postgresql | pgbouncer | haproxy)
                "${sudo[@]}" systemctl disable --now "$pkg" >/dev/null 2>&1 || true
                ;;
            esac
        done
    fi
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
    check=0 fuzz=0 bench=0
    for arg in "$@"; do
        case "$arg" in
        --check) check=1 ;;
        --fuzz) fuzz=1 ;;
        --bench) bench=1 ;;
        *) pgt_die "usage: $0 [--check] [--fuzz] [--bench]" ;;
        esac
    done
    wanted=("${PGT_DEPS_CORE[@]}")
    ((fuzz)) && wanted+=("${PGT_DEPS_FUZZ[@]}")
    ((bench)) && wanted+=("${PGT_DEPS_BENCH[@]}")
    if ((check)); then
        missing_list="$(pgt_deps_missing "${wanted[@]}")"
        [[ -z $missing_list ]] || { printf "missing: %s\n" "$(tr "\n" " " <<<"$missing_list")"; exit 1; }
        exit 0
    fi
    pgt_deps_install "${wanted[@]}"
fi
