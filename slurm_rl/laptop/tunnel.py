"""`slurm-rl dashboard JOB` from a laptop: the job's Ray dashboard on a free port of 127.0.0.1,
until Ctrl-C. Each connection is carried over the login node's shared ssh connection (no new
login per connection, nothing listening beyond this machine) to a relay there
(login/dashboard_relay.py) that adds the job's token, which so never leaves the cluster."""

from __future__ import annotations

import json
import socket
import socketserver
import subprocess
import sys
import threading
from typing import IO

import click

from .session import Remote


def _pump(src: IO[bytes] | socket.socket, dst: IO[bytes] | socket.socket) -> None:
    """Copy until EOF, then half-close ``dst``."""
    try:
        while True:
            chunk = src.recv(65536) if isinstance(src, socket.socket) else src.read1(65536)  # type: ignore[attr-defined]
            if not chunk:
                break
            if isinstance(dst, socket.socket):
                dst.sendall(chunk)
            else:
                dst.write(chunk)
                dst.flush()
    except OSError:
        pass
    finally:
        try:
            if isinstance(dst, socket.socket):
                dst.shutdown(socket.SHUT_WR)
            else:
                dst.close()
        except OSError:
            pass


def serve(remote: Remote, where: dict[str, object], local_port: int = 0) -> socketserver.ThreadingTCPServer:
    """A listener on 127.0.0.1 whose every connection reaches the dashboard through the relay."""
    relay = [remote.python, "-m", "slurm_rl.login.dashboard_relay"]
    ssh = remote.login.command_argv([*relay, str(where["host"]), str(where["port"]), str(where["token_file"])])

    class Relay(socketserver.BaseRequestHandler):
        def handle(self) -> None:
            proc = subprocess.Popen(ssh, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
            assert proc.stdin is not None and proc.stdout is not None  # both piped above
            back = threading.Thread(target=_pump, args=(proc.stdout, self.request), daemon=True)
            back.start()
            _pump(self.request, proc.stdin)
            back.join()
            proc.wait()

    socketserver.ThreadingTCPServer.allow_reuse_address = True
    server = socketserver.ThreadingTCPServer(("127.0.0.1", local_port), Relay)
    server.daemon_threads = True
    return server


def forward_dashboard(remote: Remote, argv: list[str], job: str) -> int:
    """Ask the login node where the dashboard is, then relay it here until Ctrl-C."""
    res = remote.login.run(remote.slurm_rl(argv))
    if res.returncode != 0:
        sys.stderr.write(res.stderr.decode(errors="replace"))
        return res.returncode
    where = json.loads(res.stdout.decode().strip().splitlines()[-1])
    server = serve(remote, where)
    local = server.server_address[1]
    click.echo(
        f"http://127.0.0.1:{local}    # Ray dashboard of job {job} (head node {where['head_node']}), "
        f"through {remote.login.target}; Ctrl-C stops",
    )
    sys.stdout.flush()
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0
