"""One browser connection to a job's Ray dashboard, relayed over stdin/stdout with the job's
token added: what `slurm-rl dashboard` from a laptop runs on the login node for each connection
(``python -m slurm_rl.login.dashboard_relay HOST PORT TOKEN_FILE``; ``-``: no token, for
TensorBoard, which listens on the login node's 127.0.0.1). The token is read here, on
the cluster, and sent as Ray's ``X-Ray-Authorization`` header (the one Ray reads from proxies):
it never reaches the laptop. Each request gets ``Connection: close``, so every request is a
connection of its own and carries the header. Standard library only: it starts in a blink."""

from __future__ import annotations

import os
import socket
import sys
import threading

_DROPPED = (b"x-ray-authorization:", b"connection:")


def add_token(head: bytes, token: str) -> bytes:
    """A request head (request line and headers, no blank line) with the token and
    ``Connection: close``; an upgrade (websocket) keeps its own Connection header."""
    lines = [ln for ln in head.split(b"\r\n") if ln]
    upgrade = any(ln.lower().startswith(b"upgrade:") for ln in lines[1:])
    kept = [ln for ln in lines[1:] if not ln.lower().startswith(_DROPPED[: 1 if upgrade else 2])]
    added = [b"X-Ray-Authorization: Bearer " + token.encode()] + ([] if upgrade else [b"Connection: close"])
    return b"\r\n".join([lines[0], *kept, *added, b"", b""])


def _write_all(fd: int, data: bytes) -> None:
    while data:
        data = data[os.write(fd, data) :]


def relay(host: str, port: int, token: str | None, stdin: int = 0, stdout: int = 1) -> None:
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = os.read(stdin, 65536)
        if not chunk:
            return
        head += chunk
    first, rest = head.split(b"\r\n\r\n", 1)
    with socket.create_connection((host, port), timeout=30) as sock:
        sock.settimeout(None)
        sock.sendall((add_token(first, token) if token else first + b"\r\n\r\n") + rest)

        def upstream() -> None:
            try:
                while chunk := os.read(stdin, 65536):
                    sock.sendall(chunk)
                sock.shutdown(socket.SHUT_WR)
            except OSError:
                pass

        threading.Thread(target=upstream, daemon=True).start()
        while chunk := sock.recv(65536):
            _write_all(stdout, chunk)


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print("usage: python -m slurm_rl.login.dashboard_relay HOST PORT TOKEN_FILE", file=sys.stderr)
        return 2
    host, port, token_file = argv
    token = None
    if token_file != "-":
        with open(token_file) as f:
            token = f.read().strip()
    relay(host, int(port), token)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
