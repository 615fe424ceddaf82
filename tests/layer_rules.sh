#!/usr/bin/env bash
# The layer rules of docs/architecture.md ("Layer rules"), checked on every #include "..." of
# protocol/, core/ and proxy/ (ctest: layer_rules). Fails listing each include a layer may not
# make.
#
#   tests/layer_rules.sh [REPO_ROOT]
#
# Layers, lowest first: protocol, core, then the daemon's folders proxy/net, proxy/server,
# proxy/client, proxy/pool, proxy/admin, proxy/daemon.
#   - protocol/ includes protocol/ only; core/ protocol/ and core/. Neither includes <uv.h>,
#     spdlog or <openssl/ssl.h> (pure: no loop, no logging, no sockets).
#   - A proxy header includes headers of its own folder or a lower one only: what a type needs
#     to be declared never reaches up.
#   - A proxy source (.cpp) may also include, beyond that (net/ has no exception: what its sockets
#     share of the worker is a LoopContext, net/loop_context.hpp):
#       server:              upward, proxy/client/client.hpp (a server delivers to its client)
#                            and proxy/pool/pool.hpp (it is handed out and given back) only:
#                            what it needs of its worker is a ServerContext
#                            (proxy/server/server_context.hpp);
#       client:              upward, proxy/pool/pool.hpp (it is served by its pool) and
#                            proxy/pool/listen_hub.hpp (its LISTEN) only: what it needs of its
#                            worker is a ClientContext (proxy/client/client_context.hpp), of
#                            the console a ConsoleSession (proxy/client/console_session.hpp);
#       pool:                nothing upward: what it needs of its worker and the other workers
#                            is a PoolContext (proxy/pool/pool_context.hpp);
#       admin:               nothing upward: what the console, SHOW and the metrics endpoint
#                            need of the worker is an AdminContext
#                            (proxy/admin/admin_context.hpp);
#       server, client, pool, admin: downward, anything;
#       daemon:              anything of ours.
#   - Once the folders exist, no source or header lies directly in proxy/.
#   - spdlog is included through proxy/net/log.hpp only (the compile-time fix it carries).
set -euo pipefail

root="${1:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}"
cd "$root"

rank() {
    case "$1" in
        protocol) echo 0 ;; core) echo 1 ;; net) echo 2 ;; server) echo 3 ;; client) echo 4 ;;
        pool) echo 5 ;; admin) echo 6 ;; daemon) echo 7 ;; proxy) echo 8 ;; *) echo 99 ;;
    esac
}

# The layer of a path: protocol, core, a proxy folder, or "proxy" for a file directly in proxy/.
layer_of() {
    case "$1" in
        protocol/*) echo protocol ;;
        core/*) echo core ;;
        proxy/*/*) local rest="${1#proxy/}"; echo "${rest%%/*}" ;;
        proxy/*) echo proxy ;;
        *) echo other ;;
    esac
}

split=false
[[ -d proxy/net ]] && split=true

violations=0
report() {
    echo "$1" >&2
    violations=$((violations + 1))
}

while IFS= read -r file; do
    layer=$(layer_of "$file")
    own=$(rank "$layer")
    kind=${file##*.}
    if [[ $layer == proxy ]] && $split; then
        report "$file: lies directly in proxy/; it belongs in one of its folders"
    fi
    if [[ $layer == protocol || $layer == core ]]; then
        if grep -nE '^#include[[:space:]]*<(uv\.h|spdlog/|openssl/ssl\.h)' "$file" >/dev/null; then
            while IFS= read -r hit; do
                report "$file:${hit%%:*}: $layer/ is pure: ${hit#*:}"
            done < <(grep -nE '^#include[[:space:]]*<(uv\.h|spdlog/|openssl/ssl\.h)' "$file")
        fi
    fi
    # fmt 9.1 instantiates all of its formatting in every file that logs unless told the library
    # has it: proxy/net/log.hpp says so (docs/architecture.md, "Logging").
    if [[ $file != proxy/net/log.hpp ]] && grep -nE '^#include[[:space:]]*<spdlog/spdlog\.h>' "$file" >/dev/null; then
        report "$file: includes <spdlog/spdlog.h>; include \"proxy/net/log.hpp\" instead"
    fi
    while IFS=: read -r line target; do
        [[ -n $target ]] || continue
        tlayer=$(layer_of "$target")
        [[ $tlayer == other ]] && continue  # not ours (a generated header, a test helper)
        trank=$(rank "$tlayer")
        ok=false
        if [[ $layer == proxy ]]; then
            ok=true  # before the folder split: proxy/ is one layer above core/
        elif ((trank <= own)); then
            ok=true
        elif [[ $kind == cpp ]]; then
            case "$layer" in
                server)
                    # A connection to PostgreSQL reaches its worker through ServerContext
                    # (proxy/server/server_context.hpp), never the daemon: upward only to the
                    # client it delivers to and the pool that hands it out.
                    case "$target" in
                        proxy/client/client.hpp | proxy/pool/pool.hpp) ok=true ;;
                    esac
                    ;;
                client)
                    # A client reaches its worker through ClientContext
                    # (proxy/client/client_context.hpp), never the daemon, and the console
                    # through ConsoleSession: upward only to the pool it is served by and the
                    # LISTEN hub.
                    case "$target" in
                        proxy/pool/pool.hpp | proxy/pool/listen_hub.hpp) ok=true ;;
                    esac
                    ;;
                pool)
                    # A pool reaches its worker, and through it the other workers, through
                    # PoolContext (proxy/pool/pool_context.hpp), and a console through
                    # ConsoleSession: nothing upward.
                    ;;
                daemon) ok=true ;;
            esac
        fi
        if [[ $layer == protocol && $tlayer != protocol ]]; then ok=false; fi
        if [[ $layer == core && $tlayer != protocol && $tlayer != core ]]; then ok=false; fi
        $ok || report "$file:$line: includes $target ($tlayer), which $layer/ may not"
    done < <(sed -nE 's/^#include[[:space:]]*"([^"]+)".*/\1/p;t;s/.*//p' "$file" |
             awk '{ if ($0 != "") print NR ":" $0 }')
done < <(find protocol core proxy -type f \( -name '*.hpp' -o -name '*.cpp' \) | sort)

if ((violations > 0)); then
    echo "layer_rules: $violations include(s) break the layer rules (docs/architecture.md)" >&2
    exit 1
fi
echo "layer_rules: every include of protocol/, core/ and proxy/ keeps the layer rules"
