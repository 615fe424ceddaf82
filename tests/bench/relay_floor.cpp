// relay_floor: the least work any pooler in front of PostgreSQL can do per transaction on this
// machine, measured instead of estimated (docs/benchmarks.md, "The floor under a pooler's CPU").
//
// It pairs every client connection with a server connection of its own and copies bytes both ways,
// parsing nothing: no authentication, no pooling, no protocol. A transaction through it costs the
// socket calls of the transaction and nothing else, so with as many clients as a pool has backends
// (pgbench -c 20 against a pool of 20) its CPU per transaction is what a pooler's own would be if
// its user-space work were free. Two I/O styles, one per MODE:
//
//   epoll  a read() and a write() per message and an epoll_wait() per batch of ready sockets,
//          level-triggered with every socket registered once (no epoll_ctl in the steady state):
//          the cheapest form of what libuv and libevent do, so the floor of PgBouncer and pgtether
//          as they are built;
//   uring  io_uring: every receive and send of one loop iteration goes to the kernel in the single
//          io_uring_enter() that also waits for the next completions (each send with the next
//          receive on its socket linked behind it and no completion of its own unless it fails,
//          receives armed poll-first, task work deferred to that call): the batched submission
//          docs/benchmarks.md names as the lever for pooler CPU.
//   pool   the floor of a transaction pooler, on the epoll loop: `pool_size` server connections
//          logged in at start (as `user` to `database`, trust), clients answered with the first
//          server's greeting, and each client given an idle server (last in, first out) for a
//          transaction, or queued; the server's replies are framed only as far as finding
//          ReadyForQuery 'I', which returns the server. No authentication of clients, no
//          protocol checks, no cancel keys: what is left of a pooler when everything it does
//          besides moving transactions between shared backends is free. With "threads = N"
//          it is N such loops on N threads, each on its own SO_REUSEPORT listener with its own
//          share of the pool (as N PgBouncer processes with so_reuseport); with "tls_cert" and
//          "tls_key" it answers an SSLRequest with 'S' and terminates TLS with OpenSSL on the
//          client socket itself (read-ahead on, so a record costs one read), the floor of a
//          pooler's client-side TLS (tests/bench/tls.sh).
//
// Benchmark tool only (compare.sh and profile.sh build it with g++ when a relay target is asked
// for); not part of pgtether, never run by the tests.
//
//   relay_floor CONF     CONF holds "mode = epoll|uring|pool", "listen_port = N",
//                        "upstream_port = N" (and for pool "pool_size", "user", "database",
//                        "threads", "tls_cert", "tls_key"); it listens on 127.0.0.1 and
//                        connects to 127.0.0.1. SIGTERM ends it.

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#ifdef RELAY_WITH_URING
#include <liburing.h>
#endif

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

namespace {

constexpr std::size_t kBufferBytes = 16384;

struct Pair;

// One direction's endpoint: the socket it reads and the bytes read from it that still have to be
// written to the other socket of the pair.
struct Side {
    int fd = -1;
    Side* peer = nullptr;
    Pair* pair = nullptr;
    std::size_t len = 0;  // bytes in buf waiting to be written to peer->fd
    std::size_t off = 0;  // of which already written (epoll mode)
    char buf[kBufferBytes];
};

struct Pair {
    Side client;
    Side server;
    bool closed = false;
    int in_flight = 0;  // io_uring operations not completed yet (the pair is freed at zero)
};

[[noreturn]] void die(const char* what) {
    std::fprintf(stderr, "relay_floor: %s: %s\n", what, std::strerror(errno));
    std::exit(1);
}

void set_nodelay(int fd) {
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

sockaddr_in loopback(int port) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<std::uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return a;
}

// `shared`: one of several listeners on the port (SO_REUSEPORT), the kernel spreading the
// connections over them.
int listen_on(int port, bool shared) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) die("socket");
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (shared && setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one) < 0)
        die("SO_REUSEPORT");
    sockaddr_in a = loopback(port);
    if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) < 0) die("bind");
    if (listen(fd, 1024) < 0) die("listen");
    return fd;
}

// A new pair for an accepted client, its server connection made with a blocking connect (the
// benchmark's clients all connect before the measured run starts). nullptr when the server refuses.
// The epoll loop wants non-blocking sockets; io_uring's must stay blocking (on a non-blocking
// socket a receive issued from its worker threads fails with EAGAIN instead of waiting).
Pair* make_pair(int client_fd, int upstream_port, bool nonblocking) {
    int server_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (server_fd < 0) return nullptr;
    sockaddr_in a = loopback(upstream_port);
    if (connect(server_fd, reinterpret_cast<sockaddr*>(&a), sizeof a) < 0) {
        close(server_fd);
        return nullptr;
    }
    if (nonblocking) {
        fcntl(server_fd, F_SETFL, fcntl(server_fd, F_GETFL) | O_NONBLOCK);
        fcntl(client_fd, F_SETFL, fcntl(client_fd, F_GETFL) | O_NONBLOCK);
    }
    set_nodelay(client_fd);
    set_nodelay(server_fd);
    auto* p = new Pair;
    p->client.fd = client_fd;
    p->server.fd = server_fd;
    p->client.peer = &p->server;
    p->server.peer = &p->client;
    p->client.pair = p->server.pair = p;
    return p;
}

// ---- epoll ----

constexpr int kEventBatch = 128;

// The next batch of ready sockets, waiting as long as it takes (a signal's interruption retried).
int wait_for_events(int ep, epoll_event (&events)[kEventBatch]) {
    for (;;) {
        int n = epoll_wait(ep, events, kEventBatch, -1);
        if (n >= 0) return n;
        if (errno != EINTR) die("epoll_wait");
    }
}

// The events socket s waits for: input while nothing it read is still unwritten, output while
// data bound for it is.
std::uint32_t interest(const Side& s) {
    return (s.len == 0 ? EPOLLIN : 0u) | (s.peer->len != 0 ? EPOLLOUT : 0u);
}

// Writes what s holds to its peer's socket; false when the pair has to close.
bool flush(Side& s) {
    while (s.off < s.len) {
        ssize_t n = send(s.peer->fd, s.buf + s.off, s.len - s.off, MSG_NOSIGNAL);
        if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK;
        s.off += static_cast<std::size_t>(n);
    }
    s.len = s.off = 0;
    return true;
}

void close_pair(Pair* p) {
    if (p->closed) return;
    p->closed = true;
    close(p->client.fd);
    close(p->server.fd);
}

void update(int ep, Side& s) {
    epoll_event ev{};
    ev.events = interest(s);
    ev.data.ptr = &s;
    epoll_ctl(ep, EPOLL_CTL_MOD, s.fd, &ev);
}

int run_epoll(int listen_fd, int upstream_port) {
    int ep = epoll_create1(EPOLL_CLOEXEC);
    if (ep < 0) die("epoll_create1");
    epoll_event lev{};
    lev.events = EPOLLIN;
    lev.data.ptr = nullptr;
    epoll_ctl(ep, EPOLL_CTL_ADD, listen_fd, &lev);
    std::vector<Pair*> closed;
    epoll_event events[kEventBatch];
    for (;;) {
        int n = wait_for_events(ep, events);
        for (int i = 0; i < n; ++i) {
            auto* s = static_cast<Side*>(events[i].data.ptr);
            if (s == nullptr) {
                int fd;
                while ((fd = accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC)) >= 0) {
                    Pair* p = make_pair(fd, upstream_port, true);
                    if (p == nullptr) {
                        close(fd);
                        continue;
                    }
                    for (Side* side : {&p->client, &p->server}) {
                        epoll_event ev{};
                        ev.events = EPOLLIN;
                        ev.data.ptr = side;
                        epoll_ctl(ep, EPOLL_CTL_ADD, side->fd, &ev);
                    }
                }
                continue;
            }
            if (s->pair->closed) continue;
            bool ok = true;
            if (events[i].events & EPOLLOUT) {
                // Data bound for s is pending in its peer.
                ok = flush(*s->peer);
                if (ok && s->peer->len == 0) {
                    update(ep, *s);
                    update(ep, *s->peer);
                }
            }
            if (ok && (events[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) && s->len == 0) {
                ssize_t r = recv(s->fd, s->buf, kBufferBytes, 0);
                if (r > 0) {
                    s->len = static_cast<std::size_t>(r);
                    ok = flush(*s);
                    if (ok && s->len != 0) {
                        update(ep, *s);
                        update(ep, *s->peer);
                    }
                } else if (r == 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) {
                    ok = false;
                }
            }
            if (!ok) {
                close_pair(s->pair);  // closing the fds removes them from the epoll set
                closed.push_back(s->pair);
            }
        }
        for (Pair* p : closed)
            delete p;  // only after the batch: later events may name them
        closed.clear();
    }
}

// ---- pool: the floor of a transaction pooler ----

struct PoolServer;

struct PoolClient {
    int fd = -1;
    SSL* ssl = nullptr;  // after an SSLRequest answered 'S': everything goes through it
    bool logged_in = false;
    PoolServer* server = nullptr;
    std::string startup;  // the start-up packet (and an SSLRequest before it) as it arrives
    std::string waiting;  // a request read while no server was free
};

struct PoolServer {
    int fd = -1;
    PoolClient* client = nullptr;
    // Framing of the server's stream: header bytes seen of the current message, its type, the
    // body bytes still to come, and whether the last ReadyForQuery said idle.
    std::size_t header_seen = 0;
    unsigned char header[5];
    std::uint32_t body_left = 0;
    bool at_body_start = false;
    bool idle_after = false;
};

std::uint32_t be32(const unsigned char* p) {
    return std::uint32_t{p[0]} << 24 | std::uint32_t{p[1]} << 16 | std::uint32_t{p[2]} << 8 | p[3];
}

void put32(std::string& out, std::uint32_t v) {
    for (int shift = 24; shift >= 0; shift -= 8)
        out.push_back(static_cast<char>(v >> shift));
}

// Blocks until fd can take more (for_write) or has something to read: the rare full socket of
// write_all, and the rare OpenSSL write that asks for either.
void wait_for_fd(int fd, bool for_write) {
    pollfd p{fd, static_cast<short>(for_write ? POLLOUT : POLLIN), 0};
    poll(&p, 1, -1);
}

// Writes all of `data`, waiting for room if the socket is full (never the case for the small
// messages of pgbench; a pooler would queue instead).
bool write_all(int fd, const char* data, std::size_t size) {
    while (size > 0) {
        ssize_t n = send(fd, data, size, MSG_NOSIGNAL);
        if (n < 0) {
            if (errno != EAGAIN && errno != EWOULDBLOCK) return false;
            wait_for_fd(fd, true);
            continue;
        }
        data += n;
        size -= static_cast<std::size_t>(n);
    }
    return true;
}

// The client's bytes, through TLS when it asked for it: > 0 bytes read, 0 when the client is gone,
// -1 when nothing is there yet.
ssize_t client_read(PoolClient& c, unsigned char* buf, std::size_t size) {
    if (c.ssl == nullptr) {
        ssize_t r = recv(c.fd, buf, size, 0);
        if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return -1;
        return r < 0 ? 0 : r;
    }
    std::size_t n = 0;
    if (SSL_read_ex(c.ssl, buf, size, &n) == 1) return static_cast<ssize_t>(n);
    int error = SSL_get_error(c.ssl, 0);
    ERR_clear_error();
    return error == SSL_ERROR_WANT_READ || error == SSL_ERROR_WANT_WRITE ? -1 : 0;
}

bool client_write(PoolClient& c, const char* data, std::size_t size) {
    if (c.ssl == nullptr) return write_all(c.fd, data, size);
    for (;;) {
        std::size_t n = 0;
        if (SSL_write_ex(c.ssl, data, size, &n) == 1) return true;  // all of it: no partial writes
        int error = SSL_get_error(c.ssl, 0);
        ERR_clear_error();
        if (error != SSL_ERROR_WANT_READ && error != SSL_ERROR_WANT_WRITE) return false;
        wait_for_fd(c.fd, error == SSL_ERROR_WANT_WRITE);  // then the same call again
    }
}

// The server side of client TLS: the certificate and key, TLS 1.2 and 1.3 with OpenSSL's default
// suites (what pgtether and PgBouncer negotiate with libpq too), no tickets or compression, and
// read-ahead so that a record (and whatever follows it) is read in one call.
SSL_CTX* make_tls_context(const std::string& cert, const std::string& key) {
    SSL_CTX* ctx = SSL_CTX_new(TLS_server_method());
    if (ctx == nullptr || SSL_CTX_use_certificate_chain_file(ctx, cert.c_str()) != 1 ||
        SSL_CTX_use_PrivateKey_file(ctx, key.c_str(), SSL_FILETYPE_PEM) != 1) {
        std::fprintf(stderr, "relay_floor: cannot load %s / %s\n", cert.c_str(), key.c_str());
        std::exit(1);
    }
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    SSL_CTX_set_options(ctx, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_TICKET);
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
    SSL_CTX_set_read_ahead(ctx, 1);
    return ctx;
}

// Whether this chunk of the server's stream ends a transaction: its last message is
// ReadyForQuery with status 'I'. Headers are read byte by byte, bodies skipped by length.
bool ends_transaction(PoolServer& s, const unsigned char* data, std::size_t size) {
    bool ended = false;
    std::size_t i = 0;
    while (i < size) {
        if (s.header_seen < 5) {
            s.header[s.header_seen++] = data[i++];
            if (s.header_seen == 5) {
                s.body_left = be32(s.header + 1) - 4;
                s.at_body_start = true;
                if (s.body_left == 0) s.header_seen = 0;
            }
            ended = false;
            continue;
        }
        if (s.at_body_start && s.header[0] == 'Z') s.idle_after = data[i] == 'I';
        s.at_body_start = false;
        std::size_t take = std::min<std::size_t>(s.body_left, size - i);
        i += take;
        s.body_left -= static_cast<std::uint32_t>(take);
        if (s.body_left == 0) {
            s.header_seen = 0;
            ended = s.header[0] == 'Z' && s.idle_after;
        }
    }
    return ended;
}

// A server logged in with a blocking exchange at start; its greeting's ParameterStatus messages
// go to `greeting` when that is still empty.
PoolServer* pool_login(int port, const std::string& user, const std::string& database,
                       std::string& greeting) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a = loopback(port);
    if (fd < 0 || connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) < 0) die("server connect");
    std::string body;
    put32(body, 196608);  // protocol 3.0
    for (const std::string* v : {&user, &database}) {
        body += v == &user ? "user" : "database";
        body.push_back('\0');
        body += *v;
        body.push_back('\0');
    }
    body.push_back('\0');
    std::string packet;
    put32(packet, static_cast<std::uint32_t>(body.size() + 4));
    packet += body;
    if (!write_all(fd, packet.data(), packet.size())) die("server start-up");
    std::string in;
    bool fill_greeting = greeting.empty();
    for (;;) {
        char buf[4096];
        ssize_t n = recv(fd, buf, sizeof buf, 0);
        if (n <= 0) die("server login");
        in.append(buf, static_cast<std::size_t>(n));
        std::size_t at = 0;
        while (in.size() - at >= 5) {
            auto len = be32(reinterpret_cast<const unsigned char*>(in.data() + at + 1));
            if (in.size() - at < 1 + len) break;
            char type = in[at];
            if (type == 'E') {
                std::fprintf(stderr, "relay_floor: server login refused (trust expected)\n");
                std::exit(1);
            }
            if (type == 'S' && fill_greeting) greeting.append(in, at, 1 + len);
            at += 1 + len;
            if (type == 'Z') {
                fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
                set_nodelay(fd);
                auto* s = new PoolServer;
                s->fd = fd;
                return s;
            }
        }
        in.erase(0, at);
    }
}

// The answer to a client's StartupMessage: AuthenticationOk, the servers' ParameterStatus
// messages, a BackendKeyData and ReadyForQuery 'I'.
std::string client_greeting(const std::string& parameters) {
    std::string out = "R";
    put32(out, 8);
    put32(out, 0);
    out += parameters;
    out += "K";
    put32(out, 12);
    put32(out, 1);
    put32(out, 2);
    out += "Z";
    put32(out, 5);
    out += "I";
    return out;
}

// One pooling loop on listen_fd with its own pool_size servers; tls (may be null) answers
// SSLRequest.
int run_pool(int listen_fd, int upstream_port, int pool_size, const std::string& user,
             const std::string& database, SSL_CTX* tls) {
    std::string parameters;
    std::vector<PoolServer*> idle;  // last in, first out
    for (int i = 0; i < pool_size; ++i)
        idle.push_back(pool_login(upstream_port, user, database, parameters));
    const std::string greeting = client_greeting(parameters);
    std::vector<PoolClient*> queue;  // clients waiting for a server, oldest first
    std::size_t queue_head = 0;

    int ep = epoll_create1(EPOLL_CLOEXEC);
    if (ep < 0) die("epoll_create1");
    // data.u64: 0 = the listener; else a pointer with bit 0 set for servers.
    auto watch = [&](int fd, std::uint64_t tag) {
        epoll_event ev{};
        ev.events = EPOLLIN;
        ev.data.u64 = tag;
        epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
    };
    watch(listen_fd, 0);
    for (PoolServer* s : idle)
        watch(s->fd, reinterpret_cast<std::uintptr_t>(s) | 1);

    auto link = [&](PoolClient* c, PoolServer* s, const char* data, std::size_t size) {
        c->server = s;
        s->client = c;
        write_all(s->fd, data, size);
    };
    auto release = [&](PoolServer* s) {
        s->client->server = nullptr;
        s->client = nullptr;
        while (queue_head < queue.size() && queue[queue_head] == nullptr)
            ++queue_head;
        if (queue_head < queue.size()) {
            PoolClient* next = queue[queue_head++];
            if (queue_head == queue.size()) {
                queue.clear();
                queue_head = 0;
            }
            std::string request = std::move(next->waiting);
            next->waiting.clear();
            link(next, s, request.data(), request.size());
        } else {
            idle.push_back(s);
        }
    };
    // Freed after the batch of events they were dropped in: a later event may name them.
    std::vector<PoolClient*> gone_clients;
    std::vector<PoolServer*> gone_servers;
    auto drop_client = [&](PoolClient* c) {
        if (c->server) {           // mid-transaction: the server's state is unknown, drop it too
            close(c->server->fd);  // also leaves the epoll set
            c->server->fd = -1;
            gone_servers.push_back(c->server);
        }
        for (std::size_t i = queue_head; i < queue.size(); ++i)
            if (queue[i] == c) queue[i] = nullptr;
        SSL_free(c->ssl);  // without close_notify: the benchmark's clients have left already
        c->ssl = nullptr;
        close(c->fd);
        c->fd = -1;
        gone_clients.push_back(c);
    };

    // What a client sent: its start-up (SSLRequest first, perhaps), then requests.
    auto on_client_bytes = [&](PoolClient* c, unsigned char* data, std::size_t size) {
        if (!c->logged_in) {
            c->startup.append(reinterpret_cast<char*>(data), size);
            while (c->startup.size() >= 8) {
                auto len = be32(reinterpret_cast<const unsigned char*>(c->startup.data()));
                if (c->startup.size() < len) break;
                auto code = be32(reinterpret_cast<const unsigned char*>(c->startup.data() + 4));
                c->startup.erase(0, len);
                if (code == 80877103 && tls != nullptr && c->ssl == nullptr) {  // SSLRequest
                    write_all(c->fd, "S", 1);
                    c->ssl = SSL_new(tls);
                    if (c->ssl == nullptr || SSL_set_fd(c->ssl, c->fd) != 1) die("SSL_new");
                    SSL_set_accept_state(c->ssl);  // the handshake runs inside the reads
                    return;
                }
                if (code == 80877103 || code == 80877104) {  // SSLRequest, GSSENCRequest
                    write_all(c->fd, "N", 1);
                    continue;
                }
                c->logged_in = true;
                client_write(*c, greeting.data(), greeting.size());
                break;
            }
            return;
        }
        if (c->server) {
            write_all(c->server->fd, reinterpret_cast<char*>(data), size);
        } else if (data[0] == 'X') {  // Terminate between transactions: the client goes
            drop_client(c);
        } else if (!idle.empty()) {
            PoolServer* s = idle.back();
            idle.pop_back();
            link(c, s, reinterpret_cast<char*>(data), size);
        } else {
            c->waiting.append(reinterpret_cast<char*>(data), size);
            if (c->waiting.size() == size) queue.push_back(c);
        }
    };

    std::vector<unsigned char> buffer(kBufferBytes);  // one per loop: loops may run on threads
    unsigned char* buf = buffer.data();
    epoll_event events[kEventBatch];
    for (;;) {
        int n = wait_for_events(ep, events);
        for (int e = 0; e < n; ++e) {
            std::uint64_t tag = events[e].data.u64;
            if (tag == 0) {
                int fd;
                while ((fd = accept4(listen_fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC)) >=
                       0) {
                    set_nodelay(fd);
                    auto* c = new PoolClient;
                    c->fd = fd;
                    watch(fd, reinterpret_cast<std::uintptr_t>(c));
                }
                continue;
            }
            if (tag & 1) {
                auto* s = reinterpret_cast<PoolServer*>(tag & ~std::uint64_t{1});
                if (s->fd < 0) continue;
                ssize_t r = recv(s->fd, buf, kBufferBytes, 0);
                if (r <= 0) {
                    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) continue;
                    die("a server closed");  // the benchmark's servers never do
                }
                auto size = static_cast<std::size_t>(r);
                if (s->client) client_write(*s->client, reinterpret_cast<char*>(buf), size);
                if (ends_transaction(*s, buf, size) && s->client) release(s);
                continue;
            }
            auto* c = reinterpret_cast<PoolClient*>(tag);
            // Over TLS a read may leave whole messages decrypted in OpenSSL's buffer, which the
            // socket's readiness does not announce: read until it is drained.
            while (c->fd >= 0) {
                ssize_t r = client_read(*c, buf, kBufferBytes);
                if (r < 0) break;
                if (r == 0) {
                    drop_client(c);
                    break;
                }
                on_client_bytes(c, buf, static_cast<std::size_t>(r));
                if (c->ssl == nullptr || SSL_has_pending(c->ssl) != 1) break;
            }
        }
        for (PoolClient* c : gone_clients)
            delete c;
        for (PoolServer* s : gone_servers)
            delete s;
        gone_clients.clear();
        gone_servers.clear();
    }
}

// ---- io_uring ----

#ifdef RELAY_WITH_URING

enum Op : std::uintptr_t { kRecv = 0, kSend = 1, kAccept = 2 };  // in a Side pointer's low bits

std::uint64_t tag(Side* s, Op op) {
    return reinterpret_cast<std::uintptr_t>(s) | op;
}

io_uring_sqe* next_sqe(io_uring& ring) {
    io_uring_sqe* sqe = io_uring_get_sqe(&ring);
    if (sqe == nullptr) {  // the submission queue is full: hand it to the kernel and go on
        io_uring_submit(&ring);
        sqe = io_uring_get_sqe(&ring);
    }
    return sqe;
}

void arm_recv(io_uring& ring, Side& s) {
    io_uring_sqe* sqe = next_sqe(ring);
    io_uring_prep_recv(sqe, s.fd, s.buf, kBufferBytes, 0);
    sqe->ioprio |= IORING_RECVSEND_POLL_FIRST;  // just answered: nothing to read yet, wait first
    io_uring_sqe_set_data64(sqe, tag(&s, kRecv));
    ++s.pair->in_flight;
}

// Sends what s holds to its peer and, linked behind the send so that it starts only once the
// buffer is free, s's next receive: both go to the kernel in the same io_uring_enter(). The send
// waits until all of it is written (MSG_WAITALL: the kernel retries a short send) and posts a
// completion only when it fails (which cancels the linked receive), so a message relayed costs
// one completion, its receive's. s->len stays set until then: the send is counted in flight.
void arm_send(io_uring& ring, Side& s) {
    io_uring_sqe* sqe = next_sqe(ring);
    io_uring_prep_send(sqe, s.peer->fd, s.buf, s.len, MSG_NOSIGNAL | MSG_WAITALL);
    io_uring_sqe_set_data64(sqe, tag(&s, kSend));
    sqe->flags |= IOSQE_IO_LINK | IOSQE_CQE_SKIP_SUCCESS;
    ++s.pair->in_flight;
    arm_recv(ring, s);
}

void arm_accept(io_uring& ring, int listen_fd) {
    io_uring_sqe* sqe = next_sqe(ring);
    io_uring_prep_accept(sqe, listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
    io_uring_sqe_set_data64(sqe, kAccept);
}

// Shutting both sockets down completes the pair's pending operations; the last completion frees it.
void end_pair(Pair* p) {
    if (!p->closed) {
        p->closed = true;
        shutdown(p->client.fd, SHUT_RDWR);
        shutdown(p->server.fd, SHUT_RDWR);
    }
    if (p->in_flight == 0) {
        close(p->client.fd);
        close(p->server.fd);
        delete p;
    }
}

int run_uring(int listen_fd, int upstream_port) {
    io_uring ring;
    int rc =
        io_uring_queue_init(1024, &ring, IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN);
    if (rc < 0) rc = io_uring_queue_init(1024, &ring, 0);  // kernels before 6.1
    if (rc < 0) {
        errno = -rc;
        die("io_uring_queue_init");
    }
    fcntl(listen_fd, F_SETFL, fcntl(listen_fd, F_GETFL) & ~O_NONBLOCK);
    arm_accept(ring, listen_fd);
    for (;;) {
        rc = io_uring_submit_and_wait(&ring, 1);
        if (rc < 0 && rc != -EINTR) {
            errno = -rc;
            die("io_uring_submit_and_wait");
        }
        unsigned head, seen = 0;
        io_uring_cqe* cqe;
        io_uring_for_each_cqe(&ring, head, cqe) {
            ++seen;
            std::uint64_t data = cqe->user_data;
            int res = cqe->res;
            if (data == kAccept) {
                if (res >= 0) {
                    Pair* p = make_pair(res, upstream_port, false);
                    if (p == nullptr) {
                        close(res);
                    } else {
                        arm_recv(ring, p->client);
                        arm_recv(ring, p->server);
                    }
                }
                arm_accept(ring, listen_fd);
                continue;
            }
            auto* s = reinterpret_cast<Side*>(data & ~std::uint64_t{3});
            Pair* p = s->pair;
            --p->in_flight;
            if ((data & 3) == kSend) {  // only a failed send completes
                end_pair(p);
                continue;
            }
            if (s->len != 0) {
                // A send was linked ahead of this receive: cancelled means it failed and posts
                // (or posted) its own completion; otherwise it succeeded without one.
                if (res == -ECANCELED) {
                    if (p->closed) end_pair(p);
                    continue;
                }
                --p->in_flight;
                s->len = 0;
            }
            if (p->closed || res <= 0) {
                end_pair(p);
                continue;
            }
            s->len = static_cast<std::size_t>(res);
            arm_send(ring, *s);
        }
        io_uring_cq_advance(&ring, seen);
    }
}

#endif

}  // namespace

int main(int argc, char** argv) {
    if (argc != 2) {
        std::fprintf(
            stderr,
            "usage: relay_floor CONF (mode = epoll|uring|pool, listen_port = N, upstream_port = "
            "N; pool_size, user, database, threads, tls_cert, tls_key for pool)\n");
        return 2;
    }
    std::ifstream conf(argv[1]);
    if (!conf) die(argv[1]);
    std::string mode, user = "postgres", database = "postgres", tls_cert, tls_key;
    int listen_port = 0, upstream_port = 0, pool_size = 20, threads = 1;
    for (std::string line; std::getline(conf, line);) {
        auto eq = line.find('=');
        if (eq == std::string::npos) continue;
        auto trim = [](std::string v) {
            v.erase(0, v.find_first_not_of(" \t"));
            v.erase(v.find_last_not_of(" \t\r") + 1);
            return v;
        };
        std::string key = trim(line.substr(0, eq)), value = trim(line.substr(eq + 1));
        if (key == "mode") mode = value;
        if (key == "listen_port") listen_port = std::atoi(value.c_str());
        if (key == "upstream_port") upstream_port = std::atoi(value.c_str());
        if (key == "pool_size") pool_size = std::atoi(value.c_str());
        if (key == "user") user = value;
        if (key == "database") database = value;
        if (key == "threads") threads = std::atoi(value.c_str());
        if (key == "tls_cert") tls_cert = value;
        if (key == "tls_key") tls_key = value;
    }
    if (listen_port <= 0 || listen_port > 65535 || upstream_port <= 0 || upstream_port > 65535) {
        std::fprintf(stderr, "relay_floor: %s needs listen_port and upstream_port\n", argv[1]);
        return 2;
    }
    if (threads < 1 || threads > 64 || (threads > 1 && mode != "pool") ||
        (!tls_cert.empty() && mode != "pool") || pool_size < threads) {
        std::fprintf(stderr, "relay_floor: threads (1-64, at most pool_size) and TLS are for "
                             "mode = pool\n");
        return 2;
    }
    if (mode == "pool") {
        SSL_CTX* tls = tls_cert.empty() ? nullptr : make_tls_context(tls_cert, tls_key);
        // Every listener bound before any loop starts, so the first connections are spread too.
        std::vector<int> listeners;
        for (int i = 0; i < threads; ++i)
            listeners.push_back(listen_on(listen_port, threads > 1));
        auto share = [&](int loop) { return pool_size / threads + (loop < pool_size % threads); };
        std::vector<std::thread> loops;
        for (int i = 1; i < threads; ++i)
            loops.emplace_back(run_pool, listeners[i], upstream_port, share(i), user, database,
                               tls);
        return run_pool(listeners[0], upstream_port, share(0), user, database, tls);
    }
    int listen_fd = listen_on(listen_port, false);
    if (mode == "epoll") return run_epoll(listen_fd, upstream_port);
#ifdef RELAY_WITH_URING
    if (mode == "uring") return run_uring(listen_fd, upstream_port);
#endif
    std::fprintf(stderr, "relay_floor: mode %s is not built in (epoll, pool%s)\n", mode.c_str(),
#ifdef RELAY_WITH_URING
                 ", uring"
#else
                 ""
#endif
    );
    return 2;
}
