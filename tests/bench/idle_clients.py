#!/usr/bin/python3
"""Open N idle client connections to a PostgreSQL-protocol server and keep them open.

Each connection does the full start-up: StartupMessage, authentication (trust, cleartext, MD5 or
SCRAM-SHA-256), up to ReadyForQuery, and optionally runs one simple query (--query: an idle client
that has done some work). Then the helper prints "READY <n>" on stdout and holds every
connection until stdin reaches EOF (or SIGTERM/SIGINT), then sends Terminate and exits.

With --tls each connection first sends SSLRequest and runs a TLS handshake (no certificate
verification: a benchmark, not a security check).

Used by tests/bench/compare.sh --idle and tests/bench/tls.sh --idle to measure a pooler's memory
per idle client. Standard library
only (raw sockets), so it runs with Debian's /usr/bin/python3 and opens thousands of connections
cheaply.
"""
import argparse
import base64
import hashlib
import hmac
import os
import resource
import signal
import socket
import ssl
import struct
import sys


class ProtocolError(Exception):
    pass


def recv_exact(sock, n):
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ProtocolError("server closed the connection")
        buf += chunk
    return buf


def read_message(sock):
    header = recv_exact(sock, 5)
    kind, length = header[:1], struct.unpack("!I", header[1:])[0]
    if length < 4 or length > 1 << 24:
        raise ProtocolError(f"bad message length {length}")
    return kind, recv_exact(sock, length - 4)


def send_message(sock, kind, body):
    sock.sendall(kind + struct.pack("!I", len(body) + 4) + body)


def error_text(body):
    fields = {}
    for part in body.split(b"\0"):
        if part:
            fields[chr(part[0])] = part[1:].decode(errors="replace")
    return f"{fields.get('S', '?')} {fields.get('C', '?')}: {fields.get('M', '?')}"


def scram_client(sock, user, password, mechanisms):
    """SCRAM-SHA-256 without channel binding (RFC 5802, RFC 7677; PostgreSQL protocol §55.3)."""
    if "SCRAM-SHA-256" not in mechanisms:
        raise ProtocolError(f"no supported SASL mechanism in {mechanisms}")
    nonce = base64.b64encode(os.urandom(18)).decode()
    first_bare = f"n=,r={nonce}"  # PostgreSQL ignores the SCRAM user name: it has the startup one
    first = ("n,," + first_bare).encode()
    send_message(sock, b"p", b"SCRAM-SHA-256\0" + struct.pack("!I", len(first)) + first)
    kind, body = read_message(sock)
    if kind == b"E":
        raise ProtocolError(error_text(body))
    if kind != b"R" or struct.unpack("!I", body[:4])[0] != 11:
        raise ProtocolError("expected AuthenticationSASLContinue")
    server_first = body[4:].decode()
    attrs = dict(item.split("=", 1) for item in server_first.split(","))
    if not attrs["r"].startswith(nonce):
        raise ProtocolError("server nonce does not extend ours")
    salted = hashlib.pbkdf2_hmac("sha256", password.encode(), base64.b64decode(attrs["s"]),
                                 int(attrs["i"]))
    client_key = hmac.new(salted, b"Client Key", hashlib.sha256).digest()
    stored_key = hashlib.sha256(client_key).digest()
    final_bare = f"c=biws,r={attrs['r']}"
    auth_message = f"{first_bare},{server_first},{final_bare}".encode()
    signature = hmac.new(stored_key, auth_message, hashlib.sha256).digest()
    proof = bytes(a ^ b for a, b in zip(client_key, signature))
    final = f"{final_bare},p={base64.b64encode(proof).decode()}".encode()
    send_message(sock, b"p", final)


def start_tls(sock, host):
    """SSLRequest (protocol §55.2.10), then the handshake; returns the TLS socket."""
    sock.sendall(struct.pack("!II", 8, 80877103))
    answer = recv_exact(sock, 1)
    if answer != b"S":
        raise ProtocolError(f"server refused TLS: {answer!r}")
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context.wrap_socket(sock, server_hostname=host)


def connect(host, port, user, database, password, timeout, tls=False):
    sock = socket.create_connection((host, port), timeout=timeout)
    if tls:
        sock = start_tls(sock, host)
    body = struct.pack("!I", 196608)
    for key, value in (("user", user), ("database", database),
                       ("application_name", "idle_clients")):
        body += key.encode() + b"\0" + value.encode() + b"\0"
    body += b"\0"
    sock.sendall(struct.pack("!I", len(body) + 4) + body)
    while True:
        kind, body = read_message(sock)
        if kind == b"E":
            raise ProtocolError(error_text(body))
        if kind == b"Z":
            sock.settimeout(None)
            return sock
        if kind != b"R":
            continue  # ParameterStatus, BackendKeyData, NoticeResponse
        code = struct.unpack("!I", body[:4])[0]
        if code == 0:
            continue  # AuthenticationOk
        if password is None:
            raise ProtocolError(f"server asks for a password (auth request {code}); use --password")
        if code == 3:
            send_message(sock, b"p", password.encode() + b"\0")
        elif code == 5:
            salt = body[4:8]
            inner = hashlib.md5(password.encode() + user.encode()).hexdigest().encode()
            send_message(sock, b"p", b"md5" + hashlib.md5(inner + salt).hexdigest().encode() + b"\0")
        elif code == 10:
            mechanisms = [m.decode() for m in body[4:].split(b"\0") if m]
            scram_client(sock, user, password, mechanisms)
        elif code == 12:
            continue  # AuthenticationSASLFinal; we trust the server in a benchmark
        else:
            raise ProtocolError(f"unsupported authentication request {code}")


def run_query(sock, sql):
    """One simple query (protocol §55.2.2); its results are read and dropped."""
    send_message(sock, b"Q", sql.encode() + b"\0")
    error = None
    while True:
        kind, body = read_message(sock)
        if kind == b"E":
            error = error_text(body)
        elif kind == b"Z":
            if error:
                raise ProtocolError(error)
            return


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--user", default="postgres")
    parser.add_argument("--dbname", required=True)
    parser.add_argument("--password", default=os.environ.get("PGPASSWORD"))
    parser.add_argument("-n", "--clients", type=int, default=5000)
    parser.add_argument("--timeout", type=float, default=30.0, help="per connection, seconds")
    parser.add_argument("--query", help="simple query each client runs once before idling")
    parser.add_argument("--tls", action="store_true", help="SSLRequest and TLS first")
    args = parser.parse_args()

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = args.clients + 64
    if soft < want:
        if hard != resource.RLIM_INFINITY and hard < want:
            sys.exit(f"idle_clients: need {want} file descriptors, hard limit is {hard}")
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))

    # SIGTERM/SIGINT end the wait on stdin below like EOF does.
    def stop(_signum, _frame):
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, stop)

    socks = []
    try:
        for i in range(args.clients):
            try:
                sock = connect(args.host, args.port, args.user, args.dbname, args.password,
                               args.timeout, args.tls)
                socks.append(sock)
                if args.query:
                    sock.settimeout(args.timeout)
                    run_query(sock, args.query)
                    sock.settimeout(None)
            except (OSError, ProtocolError) as exc:  # ssl.SSLError is an OSError
                print(f"FAILED {i} {exc}", flush=True)
                return 1
        print(f"READY {len(socks)}", flush=True)
        sys.stdin.read()  # hold the connections until the caller closes our stdin
    except KeyboardInterrupt:
        pass
    finally:
        for sock in socks:
            try:
                send_message(sock, b"X", b"")
                sock.close()
            except OSError:
                pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
