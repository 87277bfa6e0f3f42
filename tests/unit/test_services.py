"""A service part's instances on one node, for real (processes on this machine, no SLURM, no
Ray): started on free ports with their GPU share and logs, ready by HTTP, restarted when they
exit until their restarts run out; node 0's watch names a required one that failed; the
balancer's one URL keeps answering while an instance dies."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from types import SimpleNamespace

import pytest

from slurm_rl.core.parts import Part
from slurm_rl.core.paths import JobPaths
from slurm_rl.core.ports import ephemeral_range, listen_range
from slurm_rl.job.balancer import start_balancers
from slurm_rl.job.context import NodeFailure
from slurm_rl.job.service_instances import ServiceRunner
from slurm_rl.job.service_watch import ServiceWatch
from slurm_rl.job.spawn_gate import SpawnGate

SUPERVISOR = Path(__file__).resolve().parents[2] / "slurm_rl" / "job" / "service_supervise.sh"
SERVER = (
    "import http.server, json, os, sys\n"
    "class H(http.server.BaseHTTPRequestHandler):\n"
    "    def do_GET(self):\n"
    "        body = json.dumps({'pid': os.getpid(), 'gpus': os.environ.get('CUDA_VISIBLE_DEVICES'),"
    " 'token': os.environ.get('RAY_AUTH_TOKEN_PATH')}).encode()\n"
    "        self.send_response(200); self.send_header('Content-Length', str(len(body))); self.end_headers()\n"
    "        self.wfile.write(body)\n"
    "    def log_message(self, *a): pass\n"
    "print('serving', flush=True)\n"
    "http.server.ThreadingHTTPServer(('127.0.0.1', int(sys.argv[1])), H).serve_forever()\n"
)


def fake_ctx(tmp_path: Path, parts: dict[str, Part]):  # type: ignore[no-untyped-def]
    events: list[dict] = []
    manifest = SimpleNamespace(parts=parts, workdir=str(tmp_path), container=SimpleNamespace(image=None),
                               service_code_dir=lambda _job_dir: str(tmp_path), ready_timeout_s=30.0,
                               node_local_dir=str(tmp_path / "nodelocal"),
                               own_image_parts=[n for n, p in parts.items() if p.image])  # fmt: skip
    return SimpleNamespace(
        manifest=manifest, paths=JobPaths(tmp_path / "123"), node="n1", ip="127.0.0.1", attempt=0,
        stop_requested=threading.Event(), events=events, say=lambda _msg: None, spawns=SpawnGate(RuntimeError),
        event=lambda name, **f: events.append({"event": name, **f}),
    )  # fmt: skip


@pytest.fixture
def server(tmp_path: Path) -> str:
    path = tmp_path / "server.py"
    path.write_text(SERVER)
    return f"{sys.executable} {path} {{port}}"


def run_until(runner: ServiceRunner, cond, timeout_s: float = 20.0) -> bool:  # type: ignore[no-untyped-def]
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        runner.poll()
        if cond():
            return True
        time.sleep(0.05)
    return False


def get(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=5) as res:
        return json.loads(res.read())


def test_instances_start_on_their_own_ports_with_their_gpus_and_restart_until_they_fail(
    tmp_path: Path, server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RAY_AUTH_TOKEN_PATH", "/job/ray_auth_token")
    part = Part(nodes=1, service=server, replicas_per_node=2, gpus_per_node=4, ready="http:/health", restarts=1,
                image="sandbox.sqsh")  # fmt: skip
    ctx = fake_ctx(tmp_path, {"t": Part(nodes=1), "judge": part})
    runner = ServiceRunner(ctx, "judge", 2, ["0", "1", "2", "3"])
    assert runner.remote  # an image of its own: its instances run by the supervisor in that image's step
    supervisor = subprocess.Popen(
        ["bash", str(SUPERVISOR), "judge", "2"],
        env={**os.environ, "SLURM_RL_JOB_DIR": str(ctx.paths.job_dir), "SLURMD_NODENAME": "n1"},
        start_new_session=True,
    )
    runner.start()
    try:
        assert run_until(runner, lambda: all(i.state == "ready" for i in runner.instances))
        a, b = (get(f"http://127.0.0.1:{i.port}/x") for i in runner.instances)
        assert (a["gpus"], b["gpus"]) == ("0,1", "2,3")
        assert a["pid"] == b["pid"] == 1  # isolated: each the first process of a PID namespace of its own
        assert a["token"] is None  # an isolated part (an image of its own): no Ray token variable
        assert runner.instances[0].port != runner.instances[1].port
        # drawn where no outgoing connection's source port can take it before the instance binds
        low, high = listen_range(ephemeral_range()) or (0, 0)
        assert all(low <= i.port < high for i in runner.instances), [i.port for i in runner.instances]
        state = json.loads(ctx.paths.service_state("judge", "n1", 0).read_text())
        assert state["ready"] and state["url"] == f"http://127.0.0.1:{runner.instances[0].port}"
        assert "serving" in ctx.paths.service_log("judge", "n1", 0).read_text()
        first = runner.instances[0]
        os.kill(first.proc.pid, signal.SIGKILL)  # type: ignore[union-attr]
        assert run_until(runner, lambda: first.restarts == 1 and first.state == "ready")
        os.kill(first.proc.pid, signal.SIGKILL)  # type: ignore[union-attr]
        assert run_until(runner, lambda: first.state == "failed")
        exits = [(e["instance"], e["restart"]) for e in ctx.events if e["event"] == "service_exit"]
        assert exits == [(0, True), (0, False)]
        watch = ServiceWatch(ctx)  # type: ignore[arg-type]
        line = watch.failed_required(watch.states())
        assert line is not None and line.startswith("service judge failed on n1: instance 0 exited 137 after 1 restart")
        assert "its last lines: serving" in line
        with pytest.raises(NodeFailure, match="service judge failed on n1"):
            watch.wait_ready()
    finally:
        runner.stop()
        ctx.paths.services_stop.touch()
        supervisor.wait(timeout=10)  # the job's end: the supervisor exits
    assert all(i.proc.poll() is not None for i in runner.instances)  # type: ignore[union-attr]


def test_the_balancer_keeps_answering_while_an_instance_dies(tmp_path: Path, server: str) -> None:
    ctx = fake_ctx(tmp_path, {"t": Part(nodes=1), "judge": Part(nodes=1, service=server, replicas_per_node=2)})
    runner = ServiceRunner(ctx, "judge", 2, [])
    runner.start()
    try:
        assert run_until(runner, lambda: all(i.state == "ready" for i in runner.instances))
        [url] = start_balancers(ctx.paths.services, ["judge"], 0, "127.0.0.1").values()
        pids = {get(url + "/a")["pid"] for _ in range(6)}
        assert len(pids) == 2  # both instances answer through the one URL
        victim = runner.instances[0].proc
        os.kill(victim.pid, signal.SIGKILL)  # type: ignore[union-attr]
        victim.wait()  # type: ignore[union-attr]
        after = [get(url + "/b")["pid"] for _ in range(6)]  # refused by the dead one: the next answers
        assert victim.pid not in after and len(set(after)) == 1  # type: ignore[union-attr]
    finally:
        runner.stop()
