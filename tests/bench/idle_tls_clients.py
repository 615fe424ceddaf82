#!/usr/bin/python3
"""Open N idle client connections over TLS (SSLRequest, then a TLS handshake without certificate
verification) or in plaintext, log each in with trust authentication, and hold them.

Prints "READY <n>" on stdout once every connection reached ReadyForQuery, then keeps them open
until stdin reaches EOF (or SIGTERM/SIGINT). Used by tests/bench/tls.sh --idle to measure a
pooler's resident memory per idle TLS client. Standard library only.
"""
import argparse
import resource
import signal
import socket
import ssl
import struct
import sys


def recv_exact(sock, n):
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise RuntimeError("server closed the connection")
        buf += chunk
    return buf


def login(host, port, user, dbname, use_tls, context):
    sock = socket.create_connection((host, port), timeout=30)
    if use_tls:
        sock.sendall(struct.pack("!II", 8, 80877103))
        answer = recv_exact(sock, 1)
        if answer != b"S":
            raise RuntimeError("server refused TLS: %r" % answer)
        sock = context.wrap_socket(sock, server_hostname=host)
    params = b"user\0" + user.encode() + b"\0database\0" + dbname.encode() + b"\0\0"
    sock.sendall(struct.pack("!II", 8 + len(params), 196608) + params)
    while True:
        header = recv_exact(sock, 5)
        kind, length = header[:1], struct.unpack("!I", header[1:])[0]
        body = recv_exact(sock, length - 4)
        if kind == b"E":
            raise RuntimeError("login failed: %r" % body)
        if kind == b"R" and struct.unpack("!I", body[:4])[0] != 0:
            raise RuntimeError("only trust authentication is supported")
        if kind == b"Z":
            return sock


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--user", default="postgres")
    parser.add_argument("--dbname", default="postgres")
    parser.add_argument("--tls", action="store_true")
    parser.add_argument("-n", type=int, required=True)
    args = parser.parse_args()

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    conns = []
    try:
        for _ in range(args.n):
            conns.append(login(args.host, args.port, args.user, args.dbname, args.tls, context))
    except Exception as e:  # noqa: BLE001 - reported to the caller, which decides
        print("FAILED after %d: %s" % (len(conns), e), flush=True)
        return 1
    print("READY %d" % len(conns), flush=True)
    try:
        sys.stdin.read()
    except KeyboardInterrupt:
        pass
    for sock in conns:
        try:
            sock.sendall(b"X\0\0\0\4")
            sock.close()
        except OSError:
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
