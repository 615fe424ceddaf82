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
//
// Benchmark tool only (compare.sh and profile.sh build it with g++ when a relay target is asked
// for); not part of pgtether, never run by the tests.
//
//   relay_floor CONF     CONF holds "mode = epoll|uring", "listen_port = N", "upstream_port = N";
//                        it listens on 127.0.0.1 and connects to 127.0.0.1. SIGTERM ends it.

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

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
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

int listen_on(int port) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) die("socket");
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
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
    epoll_event events[128];
    for (;;) {
        int n = epoll_wait(ep, events, 128, -1);
        if (n < 0) {
            if (errno == EINTR) continue;
            die("epoll_wait");
        }
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
            "usage: relay_floor CONF (mode = epoll|uring, listen_port = N, upstream_port = N)\n");
        return 2;
    }
    std::ifstream conf(argv[1]);
    if (!conf) die(argv[1]);
    std::string mode;
    int listen_port = 0, upstream_port = 0;
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
    }
    if (listen_port <= 0 || listen_port > 65535 || upstream_port <= 0 || upstream_port > 65535) {
        std::fprintf(stderr, "relay_floor: %s needs listen_port and upstream_port\n", argv[1]);
        return 2;
    }
    int listen_fd = listen_on(listen_port);
    if (mode == "epoll") return run_epoll(listen_fd, upstream_port);
#ifdef RELAY_WITH_URING
    if (mode == "uring") return run_uring(listen_fd, upstream_port);
#endif
    std::fprintf(stderr, "relay_floor: mode %s is not built in (epoll%s)\n", mode.c_str(),
#ifdef RELAY_WITH_URING
                 ", uring"
#else
                 ""
#endif
    );
    return 2;
}
