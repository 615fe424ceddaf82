#!/usr/bin/env bash
# Configure and build pgtether with warnings as errors.
#
#   scripts/lib/build.sh [BUILD_TYPE [CMAKE_ARGS...]]   # default Release; build dir:
#                                                     # $PGT_BUILD_DIR or ./build
#
# Can also be sourced: pgt_build [BUILD_TYPE [CMAKE_ARGS...]]; PGT_BUILD_TARGET builds one target
# instead of all.
set -euo pipefail

# shellcheck source=scripts/lib/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

PGT_BUILD_DIR="${PGT_BUILD_DIR:-$PGT_ROOT/build}"

pgt_build() {
    local type="${1:-Release}"
    (($# == 0)) || shift
    pgt_log "building pgtether ($type${*:+ $*}) in $PGT_BUILD_DIR"
    cmake -S "$PGT_ROOT" -B "$PGT_BUILD_DIR" -DCMAKE_BUILD_TYPE="$type" -DPGTETHER_WERROR=ON "$@"
    # Two jobs: the machines this runs on are small and shared.
    cmake --build "$PGT_BUILD_DIR" -j2 ${PGT_BUILD_TARGET:+--target "$PGT_BUILD_TARGET"}
}

if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
    pgt_build "$@"
fi
