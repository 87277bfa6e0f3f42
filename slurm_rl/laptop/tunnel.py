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


def serve(
    remote: Remote, host: str, port: int, token_file: str, local_port: int = 0
) -> socketserver.ThreadingTCPServer:
    """A listener on 127.0.0.1 whose every connection reaches HOST:PORT (as the login node sees
    it) through the relay there; TOKEN_FILE ('-': none) is read there, never here."""
    relay = [remote.python, "-m", "slurm_rl.login.dashboard_relay", host, str(port), token_file]
    ssh = remote.login.command_argv(relay)

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
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Relay)
    server.daemon_threads = True
    return server


def _until_ctrl_c(server: socketserver.ThreadingTCPServer, line: str) -> None:
    click.echo(line)
    sys.stdout.flush()
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


def forward_dashboard(remote: Remote, argv: list[str], job: str) -> int:
    """Ask the login node where the dashboard is, then relay it here until Ctrl-C."""
    res = remote.login.run(remote.slurm_rl(argv))
    if res.returncode != 0:
        sys.stderr.write(res.stderr.decode(errors="replace"))
        return res.returncode
    where = json.loads(res.stdout.decode().strip().splitlines()[-1])
    server = serve(remote, str(where["host"]), int(where["port"]), str(where["token_file"]))
    _until_ctrl_c(
        server,
        f"http://127.0.0.1:{server.server_address[1]}    # Ray dashboard of job {job} (head node "
        f"{where['head_node']}), through {remote.login.target}; Ctrl-C stops",
    )
    return 0


def forward_tensorboard(remote: Remote, argv: list[str], job: str) -> int:
    """TensorBoard started on the login node for as long as this command runs (its stdin is
    this end of the ssh session), relayed here until Ctrl-C."""
    board = subprocess.Popen(
        remote.login.command_argv(remote.slurm_rl(argv)),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert board.stdin is not None and board.stdout is not None and board.stderr is not None  # piped above
    line = board.stdout.readline()
    if not line:  # it refused (no event files, no TensorBoard there): its one line
        sys.stderr.write(board.stderr.read().decode(errors="replace"))
        return board.wait() or 1
    where = json.loads(line)
    server = serve(remote, "127.0.0.1", int(where["port"]), "-")
    try:
        _until_ctrl_c(
            server,
            f"http://127.0.0.1:{server.server_address[1]}    # TensorBoard of job {job}, on "
            f"{remote.login.target}; Ctrl-C stops it",
        )
    finally:
        board.stdin.close()  # TensorBoard on the login node stops with it
        board.wait(timeout=30)
    return 0
