#!/usr/bin/env bash
# Build every libFuzzer target (tests/fuzz/fuzz_*.cpp) with clang, ASan and UBSan, and run each for a
# bounded time: its committed seeds (tests/fuzz/corpus/<name>) and crash inputs are the starting
# corpus, new inputs go to a scratch corpus in the build directory (kept between local runs).
#
#   scripts/lib/fuzz.sh [NAME...]       # default: every target; NAME as in fuzz_NAME
#   scripts/lib/fuzz.sh --build-only    # only the build (scripts/test runs it beside phase 2)
#
#   PGT_FUZZ_SECONDS     seconds per target (default 20)
#   PGT_FUZZ_JOBS        targets fuzzed at the same time (default 2: one per core of the CI
#                        machine; each libFuzzer process is single-threaded, so every target still
#                        gets its PGT_FUZZ_SECONDS of one core when the machine is otherwise idle)
#   PGT_FUZZ_BUILD_DIR   build directory (default ./build-fuzz)
#
# Prints one line per target, the log tail and the saved input of any failure, and ends with the
# line "N passed, N failed"; the exit status is 1 if any target failed (or did not build).
# Needs clang and libclang-rt-14-dev (scripts/lib/deps.sh --fuzz).
set -euo pipefail

# shellcheck source=scripts/lib/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

build_dir="${PGT_FUZZ_BUILD_DIR:-$PGT_ROOT/build-fuzz}"
seconds="${PGT_FUZZ_SECONDS:-20}"
jobs="${PGT_FUZZ_JOBS:-2}"
fuzz_src="$PGT_ROOT/tests/fuzz"

pgt_log "building the libFuzzer targets (clang, ASan + UBSan) in $build_dir"
# -O1 with line tables: quick to build, fast enough to fuzz, readable stack traces. No tests and
# no daemon: only the fuzzers (target fuzz_all).
if ! { cmake -S "$PGT_ROOT" -B "$build_dir" -DCMAKE_CXX_COMPILER=clang++ \
    -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG="-O1 -g1" -DPGTETHER_WERROR=ON \
    -DPGTETHER_FUZZ=ON -DPGTETHER_TESTS=OFF >/dev/null &&
    cmake --build "$build_dir" -j2 --target fuzz_all; }; then
    printf 'the fuzz targets did not build\n0 passed, 1 failed\n'
    exit 1
fi
[[ ${1:-} != --build-only ]] || exit 0

names=("$@")
if ((${#names[@]} == 0)); then
    for source in "$fuzz_src"/fuzz_*.cpp; do
        name="${source##*/fuzz_}"
        names+=("${name%.cpp}")
    done
fi

# fuzz_one NAME: runs one target; prints its report (one line, or the failure's details) and
# returns non-zero if it failed.
fuzz_one() {
    local name="$1"
    local bin="$build_dir/tests/fuzz/fuzz_$name"
    local scratch="$build_dir/fuzz-corpus/$name"
    local artifacts="$build_dir/fuzz-artifacts"
    local log="$build_dir/fuzz-logs/$name.log"
    mkdir -p "$scratch" "$artifacts" "${log%/*}"
    local args=(-max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1
        -artifact_prefix="$artifacts/$name-")
    [[ ! -f $fuzz_src/$name.dict ]] || args+=(-dict="$fuzz_src/$name.dict")
    local corpora=("$scratch") dir
    for dir in "$fuzz_src/corpus/$name" "$fuzz_src/crashes/$name"; do
        [[ ! -d $dir ]] || corpora+=("$dir")
    done
    if [[ -x $bin ]] && "$bin" "${args[@]}" "${corpora[@]}" >"$log" 2>&1; then
        local runs cov
        runs="$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")"
        cov="$(grep -o 'cov: [0-9]*' "$log" | tail -n 1 || true)"
        printf 'fuzz_%s: ok, %s inputs in %s s, %s\n' "$name" "${runs:-?}" "$seconds" "${cov:-cov: ?}"
        return 0
    fi
    printf 'fuzz_%s: FAILED (log: %s)\n' "$name" "$log"
    tail -n 60 "$log" 2>/dev/null | sed 's/^/    /'
    local saved
    for saved in "$artifacts/$name-"*; do
        [[ ! -e $saved ]] || printf '    saved input: %s\n' "$saved"
    done
    return 1
}

# $jobs targets at a time, each in the background with its report in a file; the reports are
# printed in the targets' order once all have finished.
reports="$build_dir/fuzz-reports"
rm -rf "$reports"
mkdir -p "$reports"
for name in "${names[@]}"; do
    while (($(jobs -rp | wc -l) >= jobs)); do wait -n || true; done
    { fuzz_one "$name" && touch "$reports/$name.ok"; } >"$reports/$name.out" 2>&1 &
done
wait

passed=0 failed=0
for name in "${names[@]}"; do
    cat "$reports/$name.out"
    if [[ -e $reports/$name.ok ]]; then
        passed=$((passed + 1))
    else
        failed=$((failed + 1))
    fi
done
printf '%d passed, %d failed\n' "$passed" "$failed"
((failed == 0))
